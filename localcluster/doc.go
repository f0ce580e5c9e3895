// Package localcluster builds, starts and stops a real Kubernetes control plane
// on 127.0.0.1: etcd, kube-apiserver, kube-controller-manager, kube-scheduler,
// kwok (simulated nodes and pod lifecycle) and CoreDNS with the kubernetes
// plugin. It is flock's demo cluster and integration-test bed.
//
// Binaries are built from the helper modules under hack/components into
// $HOME/.cache/flock/<component>-<version>/bin (see Build). A cluster lives in
// a state dir (default <repo>/.state/cluster, or $FLOCK_STATE_DIR) holding
// state.json (ports, pids), the PKI, kubeconfigs, etcd data and logs/<component>.log.
//
// # Simulated nodes and pods
//
// Nodes node-0..node-N-1 carry kubernetes.io/hostname and
// topology.kubernetes.io/zone (zone-a, zone-b, ... round robin) and a /24 of
// PodCIDR each. A scheduled pod turns Running with an IP at once and Ready
// after the cluster's readiness delay. Tests steer pods with annotations:
//
//	test.flockd.io/ready: "false"          a failing readiness probe (remove it or set "true" to recover)
//	test.flockd.io/ready-delay: "5s"       this pod's readiness delay
//	test.flockd.io/fail: "true"            containers exit 1, phase Failed
//	test.flockd.io/complete-after: "10s"   containers exit 0 after that long, phase Succeeded
//	test.flockd.io/terminate-after: "3s"   on deletion, keep terminating this long (within the grace period)
//
// Readiness gates and probes in the pod spec are not evaluated.
//
// # Real nodes
//
// As root, Options.RealNodes real nodes real-0, real-1, ... run beside the
// simulated ones: each a kubelet with its own containerd, bridge, pod /24,
// zone and mount namespace (node-local NodeLocalDir and NodeVolumesDir, a
// SharedDir common to all), with one kube-proxy for all of them (see
// node.go, machine.go). FaultNode stops, kills and starts them; AddRealNode
// adds one to a running cluster.
//
// # Prometheus
//
// Build also unpacks prometheus and promtool from Debian's prometheus
// package into $HOME/.cache/flock/prometheus/bin. The cluster does not run
// Prometheus; a test starts one on request (StartFlockPrometheus: flock's
// scrape jobs and alerting rules, targets from file_sd files the test
// writes with WriteTargets and PodTargets) and reads its API (Alerts,
// Query, Targets).
package localcluster
