#!/usr/bin/env bash
# A Flock created, scaled and deleted on the local cluster by flock-controller.
# Run through "make controller-demo" (which provides KUBECONFIG via flock-cluster exec).
set -euo pipefail
cd "$(dirname "$0")/.."
: "${KUBECONFIG:?run me through make controller-demo}"
ns="flock-demo-$RANDOM"
bin="${BIN:-bin}/flock-controller"

step() { printf '\n\033[1m== %s\033[0m\n' "$*"; }
show() {
  kubectl -n "$ns" get flock sample
  kubectl -n "$ns" get pods -l flockd.io/flock=sample -o wide
  kubectl get pv -l "flockd.io/namespace=$ns" -o custom-columns='VOLUME:.metadata.name,MEMBER:.metadata.labels.flockd\.io/member,NODE:.metadata.annotations.flockd\.io/node,STATUS:.status.phase,CLAIM:.spec.claimRef.name'
}

step "install the Flock CRD"
kubectl apply --server-side -f config/crd/bases/flockd.io_flocks.yaml
kubectl wait --for condition=Established crd/flocks.flockd.io --timeout=60s

kubectl create ns "$ns" >/dev/null

step "start flock-controller (scoped to the demo namespace; tests may run their own)"
"$bin" -kubeconfig="$KUBECONFIG" -namespace="$ns" -leader-elect=false -metrics-bind-address=0 -health-probe-bind-address=0 \
  -log-level=warn 2>"${TMPDIR:-/tmp}/flock-controller-demo.log" &
ctrl_pid=$!
cleanup() {
  kill "$ctrl_pid" 2>/dev/null || true
  kubectl delete ns "$ns" --wait=false >/dev/null 2>&1 || true
  kubectl delete pv -l "flockd.io/namespace=$ns" --wait=false >/dev/null 2>&1 || true
}
trap cleanup EXIT

step "create a NodePinned Flock of 3 (config/samples)"
kubectl -n "$ns" apply -f config/samples/flock_v1alpha1_flock.yaml
kubectl -n "$ns" wait --for=jsonpath='{.status.readyReplicas}'=3 flock/sample --timeout=120s
show

step "scale to 4: member 3 gets a new node"
kubectl -n "$ns" scale flock sample --replicas=4
kubectl -n "$ns" wait --for=jsonpath='{.status.readyReplicas}'=4 flock/sample --timeout=120s
show

step "peer-finder (dns source, CoreDNS SRV records) as member sample-0 sees the members"
"${BIN:-bin}/peer-finder" -service=sample -ns="$ns" -domain="$FLOCK_CLUSTER_DOMAIN" -dns-server="$FLOCK_DNS" \
  -hostname=sample-0 -min-peers=4 -bootstrap-timeout=60s -on-start=/bin/cat 2>&1 | grep -E 'hook output|peers delivered' 

step "scale to 2: members 2 and 3 go, their volumes and claims stay"
kubectl -n "$ns" scale flock sample --replicas=2
kubectl -n "$ns" wait --for=jsonpath='{.status.replicas}'=2 flock/sample --timeout=120s
show
kubectl -n "$ns" get pvc

step "status"
kubectl -n "$ns" get flock sample -o jsonpath='{range .status.members[*]}member {.ordinal}: node={.node} active={.active} ready={.ready}{"\n"}{end}{range .status.conditions[*]}{.type}={.status} ({.reason}){"\n"}{end}'
