package localcluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"text/template"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
)

// The real nodes: real-0, real-1, ... on this machine, beside the simulated
// ones. Each is a kubelet with its own containerd (root, state, socket), its
// own bridge and pod /24, its own kubelet, pod-log and CNI directories, and
// its own mount namespace, in which the node-local directories (NodeLocalDir,
// NodeVolumesDir) are that node's alone and SharedDir is the same for all.
// The nodes share this machine's network namespace: one kube-proxy serves
// them all, and routing between their bridges is this machine's.
const (
	// RealNodeLabel is the label (value "true") and NoSchedule taint key of
	// the real nodes: only pods that select and tolerate it land there.
	RealNodeLabel = "node.flockd.io/real"
	// ControlPlaneIP is where pods reach the control plane: real-0's
	// bridge address, which stays up while real-0 is stopped or killed.
	ControlPlaneIP = "10.245.0.1"
	// DNSServiceIP is the kube-dns Service (CoreDNS), the kubelets' clusterDNS.
	DNSServiceIP = "10.96.0.10"
	// DefaultRealNodes is how many real nodes flock-cluster and the test
	// bed start as root.
	DefaultRealNodes = 3

	// NodeLocalDir is node-local: the same path on every real node, a
	// different directory on each (hostPath volumes, flock-controller's
	// node-pinned storage).
	NodeLocalDir = "/var/lib/flock"
	// NodeVolumesDir is where the default StorageClass's volumes live, also
	// node-local.
	NodeVolumesDir = "/var/lib/flock-volumes"
	// SharedDir is one directory seen by every real node, as an NFS mount
	// would be (one shared hosts file for a whole job).
	SharedDir = "/var/lib/flock-shared"

	maxRealNodes = 16
	// realNodesCIDR holds every real node's pod /24: 10.245.<i>.0/24.
	realNodesCIDR = "10.245.0.0/16"
	bridgePrefix  = "flock" // bridges flock0, flock1, ...
	zoneLabel     = "topology.kubernetes.io/zone"
)

// RealNodesFromEnv is how many real nodes the environment asks for:
// $FLOCK_REAL_NODES, else DefaultRealNodes; FLOCK_REAL_NODE=0 (the
// single-node spelling) turns them off too.
func RealNodesFromEnv() int {
	switch os.Getenv("FLOCK_REAL_NODE") {
	case "0", "off", "false":
		return 0
	}
	if v := os.Getenv("FLOCK_REAL_NODES"); v != "" {
		if n, err := strconv.Atoi(v); err == nil && n >= 0 {
			return n
		}
	}
	return DefaultRealNodes
}

// RealNode describes one real node.
type RealNode struct {
	Name    string `json:"name"`
	IP      string `json:"ip"`
	Zone    string `json:"zone"`
	Bridge  string `json:"bridge"`
	PodCIDR string `json:"podCIDR"`
	// Dir holds the node's kubelet and containerd roots, configs and the
	// directories behind its node-local paths (see HostPath).
	Dir string `json:"dir"`
	// RunDir holds its containerd socket and state.
	RunDir     string `json:"runDir"`
	Containerd string `json:"containerd"` // containerd socket path
	// MountNS is the file its mount namespace is bound to; its kubelet,
	// containerd and containers run there.
	MountNS string `json:"mountNS"`
	// Shared is the directory on this machine behind SharedDir.
	Shared string `json:"shared"`
	// Down is set while the node is down on purpose: "stopped" (its
	// kubelet) or "killed" (everything of it).
	Down string `json:"down,omitempty"`
}

func newRealNode(stateDir string, i int) *RealNode {
	name := fmt.Sprintf("real-%d", i)
	run := filepath.Join(nodeRunDir, name)
	return &RealNode{
		Name: name, IP: fmt.Sprintf("10.245.%d.1", i), Zone: fmt.Sprintf("zone-real-%d", i),
		Bridge: fmt.Sprintf("%s%d", bridgePrefix, i), PodCIDR: fmt.Sprintf("10.245.%d.0/24", i),
		Dir:    filepath.Join(stateDir, "nodes", name),
		RunDir: run, Containerd: filepath.Join(run, "containerd.sock"),
		MountNS: filepath.Join(nodeRunDir, "ns", name),
		Shared:  filepath.Join(stateDir, "nodes", "shared"),
	}
}

// nextRealNodeIndex is the lowest index i for which the cluster has no
// real-i, within maxRealNodes (the /24s of realNodesCIDR it plans for).
func nextRealNodeIndex(nodes []*RealNode) (int, error) {
	for i := range maxRealNodes {
		name := fmt.Sprintf("real-%d", i)
		if !slices.ContainsFunc(nodes, func(n *RealNode) bool { return n.Name == name }) {
			return i, nil
		}
	}
	return 0, fmt.Errorf("the cluster has %d real nodes, the most the address plan fits (10.245.<i>.0/24, i < %d)", len(nodes), maxRealNodes)
}

func (n *RealNode) save() error { return writeJSON(filepath.Join(n.Dir, "node.json"), n) }

// prepare makes the node's directory, its record there (node.json, which
// cleanupNode reads) and its bridge with the node's address. The caller
// holds lockNodes.
func (n *RealNode) prepare(ctx context.Context) error {
	if err := os.MkdirAll(n.Dir, 0o755); err != nil {
		return fmt.Errorf("create real node dir: %w", err)
	}
	if err := n.save(); err != nil {
		return err
	}
	for _, c := range [][]string{
		{"ip", "link", "add", n.Bridge, "type", "bridge"},
		{"ip", "addr", "add", n.IP + "/24", "dev", n.Bridge},
		{"ip", "link", "set", n.Bridge, "up"},
	} {
		if err := run(ctx, c...); err != nil {
			return err
		}
	}
	return nil
}

// kubeconfig is the node's kubelet kubeconfig (see writeNodePKI).
func (n *RealNode) kubeconfig(stateDir string) string {
	return filepath.Join(stateDir, "config", "kubelet-"+n.Name+".kubeconfig")
}

// bind is a directory of this machine mounted at a path of the node.
type bind struct{ src, dst string }

func (n *RealNode) binds() []bind {
	return []bind{
		{filepath.Join(n.Dir, "local"), NodeLocalDir},
		{filepath.Join(n.Dir, "volumes"), NodeVolumesDir},
		{n.Shared, SharedDir},
	}
}

// HostPath is where path, as the node's pods and kubelet see it, is on this
// machine: below n.Dir for the node-local directories, the shared directory
// for SharedDir, path itself otherwise.
func (n *RealNode) HostPath(path string) string {
	path = filepath.Clean(path)
	for _, b := range n.binds() {
		if rel, err := filepath.Rel(b.dst, path); err == nil && rel != ".." && !strings.HasPrefix(rel, "../") {
			return filepath.Join(b.src, rel)
		}
	}
	return path
}

// makeMountNS makes the node's mount namespace: this machine's mounts (and
// later changes to them) with the node-local directories bound over.
func (n *RealNode) makeMountNS(ctx context.Context) error {
	dir := filepath.Dir(n.MountNS)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("create %s: %w", dir, err)
	}
	// A namespace can be bound only to a file on a private mount.
	if len(mountsMatching(func(p string) bool { return p == dir })) == 0 {
		if err := run(ctx, "mount", "--bind", dir, dir); err != nil {
			return err
		}
	}
	if err := run(ctx, "mount", "--make-private", dir); err != nil {
		return err
	}
	if err := os.WriteFile(n.MountNS, nil, 0o644); err != nil {
		return fmt.Errorf("mount namespace file: %w", err)
	}
	if err := run(ctx, "unshare", "--mount="+n.MountNS, "--propagation=slave", "true"); err != nil {
		return fmt.Errorf("mount namespace of %s: %w", n.Name, err)
	}
	for _, b := range n.binds() {
		for _, d := range []string{b.src, b.dst} { // dst: the mount point, on this machine too
			if err := os.MkdirAll(d, 0o755); err != nil {
				return fmt.Errorf("node dir: %w", err)
			}
		}
		if err := run(ctx, "nsenter", "--mount="+n.MountNS, "mount", "--bind", b.src, b.dst); err != nil {
			return fmt.Errorf("node-local %s of %s: %w", b.dst, n.Name, err)
		}
	}
	return nil
}

// kill SIGKILLs every process of the node (its kubelet, containerd, shims
// and their containers) at once and drops its mount namespace, as a power
// loss would. Its directories stay on disk.
func (n *RealNode) kill() {
	if fi, err := os.Stat(n.MountNS); err == nil {
		if st, ok := fi.Sys().(*syscall.Stat_t); ok {
			ns := fmt.Sprintf("mnt:[%d]", st.Ino)
			pids := pidsInMountNS(ns)
			for _, pid := range pids {
				killTree(pid)
			}
			for i := 0; i < 100 && len(pidsInMountNS(ns)) > 0; i++ {
				time.Sleep(50 * time.Millisecond)
			}
		}
	}
	_ = syscall.Unmount(n.MountNS, syscall.MNT_DETACH)
	_ = os.Remove(n.MountNS)
}

// procName is the name of a node's component in State.Procs and logs/.
func (n *RealNode) procName(component string) string { return n.Name + "-" + component }

// nodeConfig is what the node's config templates need.
type nodeConfig struct {
	*RealNode
	PKI, DNS, Domain string
	HealthzPort      int
	SandboxImage     string
}

// startFunc starts a component process named name from bin and records it.
type startFunc func(name, bin string, args ...string) error

// startNodes starts every real node (startRealNodes), then kube-proxy and
// the volume provisioner, and waits until all are Ready.
func startNodes(ctx context.Context, s *State, o Options, cs kubernetes.Interface, bins map[string]string, start startFunc) error {
	step := stepper(o.Progress)
	if err := startRealNodes(ctx, s, s.RealNodes, o.ImagesDir, bins["kubelet"], start); err != nil {
		return err
	}
	step("real nodes: containerd, images, kubelets")
	ports, err := FreePorts(2)
	if err != nil {
		return err
	}
	kc := filepath.Join(s.StateDir, "config")
	if err := start("kube-proxy", bins["kube-proxy"],
		"--kubeconfig="+filepath.Join(kc, "kube-proxy.kubeconfig"),
		// One kube-proxy for all real nodes: they share this machine's
		// network namespace, where its rules serve every bridge.
		"--hostname-override="+s.RealNodes[0].Name,
		"--proxy-mode=nftables",
		"--cluster-cidr="+realNodesCIDR,
		"--nodeport-addresses="+realNodesCIDR,
		"--healthz-bind-address=127.0.0.1:"+strconv.Itoa(ports[0]),
		"--metrics-bind-address=127.0.0.1:"+strconv.Itoa(ports[1]),
		"--conntrack-max-per-core=0",
		"--conntrack-tcp-timeout-established=0",
		"--conntrack-tcp-timeout-close-wait=0",
	); err != nil {
		return err
	}
	if err := clusterDNSService(ctx, cs, s.DNSAddr); err != nil {
		return err
	}
	if err := waitRealNodesReady(ctx, s, cs, s.RealNodes); err != nil {
		return err
	}
	if err := waitHTTP(ctx, s, "kube-proxy", fmt.Sprintf("http://127.0.0.1:%d/healthz", ports[0]), false); err != nil {
		return err
	}
	if err := startStorage(ctx, s, cs, bins, start); err != nil {
		return err
	}
	step(fmt.Sprintf("%d real nodes ready", len(s.RealNodes)))
	return nil
}

// startRealNodes runs the start steps that Up and AddRealNode share for
// nodes, which prepare made: each node's configs and kubelet credentials,
// its mount namespace and containerd, the images of imagesDir imported (in
// parallel: each containerd unpacks its own copy), then its kubelet. Wait
// for them with waitRealNodesReady.
func startRealNodes(ctx context.Context, s *State, nodes []*RealNode, imagesDir, kubelet string, start startFunc) error {
	for _, n := range nodes {
		if err := n.configure(s); err != nil {
			return err
		}
		if err := n.makeMountNS(ctx); err != nil {
			return err
		}
		if err := n.startContainerd(ctx, s, start); err != nil {
			return err
		}
	}
	errs := make([]error, len(nodes))
	var wg sync.WaitGroup
	for i, n := range nodes {
		wg.Go(func() { errs[i] = n.LoadImages(ctx, imagesDir) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	for _, n := range nodes {
		if err := n.startKubelet(s, kubelet, start); err != nil {
			return err
		}
	}
	return nil
}

// waitRealNodesReady waits until every node of nodes is Ready.
func waitRealNodesReady(ctx context.Context, s *State, cs kubernetes.Interface, nodes []*RealNode) error {
	for _, n := range nodes {
		if err := waitNodeReady(ctx, s, cs, n.Name); err != nil {
			return err
		}
	}
	return nil
}

// configure writes the node's directories, config files and kubelet
// credentials.
func (n *RealNode) configure(s *State) error {
	if err := writeNodePKI(s.StateDir, s.Server, n); err != nil {
		return err
	}
	ports, err := FreePorts(1)
	if err != nil {
		return err
	}
	c := nodeConfig{
		RealNode: n, PKI: filepath.Join(s.StateDir, "pki"),
		DNS: DNSServiceIP, Domain: Domain, HealthzPort: ports[0],
		SandboxImage: "ghcr.io/flockd/pause:dev",
	}
	for _, d := range []string{"cni/net.d", "cni/ipam", "kubelet", "pod-logs", "containerd/root", n.RunDir} {
		if !filepath.IsAbs(d) {
			d = filepath.Join(n.Dir, d)
		}
		if err := os.MkdirAll(d, 0o755); err != nil {
			return fmt.Errorf("create real node dir: %w", err)
		}
	}
	for file, tmpl := range map[string]*template.Template{
		"containerd.toml":             containerdConfig,
		"cni/net.d/10-flock.conflist": cniConfig,
		"kubelet.yaml":                kubeletConfig,
		"resolv.conf":                 hostResolvConf,
	} {
		var b bytes.Buffer
		if err := tmpl.Execute(&b, c); err != nil {
			return fmt.Errorf("render %s: %w", file, err)
		}
		if err := os.WriteFile(filepath.Join(n.Dir, file), b.Bytes(), 0o644); err != nil {
			return fmt.Errorf("write %s: %w", file, err)
		}
	}
	return nil
}

// inNode is the argv prefix that runs a command in the node's mount namespace.
func (n *RealNode) inNode(bin string) (string, []string) {
	return nodePackageFile("util-linux"), []string{"--mount=" + n.MountNS, "--", bin}
}

func (n *RealNode) startContainerd(ctx context.Context, s *State, start startFunc) error {
	bin, args := n.inNode(nodePackageFile("containerd"))
	if err := start(n.procName("containerd"), bin, append(args, "--config="+filepath.Join(n.Dir, "containerd.toml"))...); err != nil {
		return err
	}
	return n.waitContainerd(ctx, s)
}

// waitContainerd waits until the node's containerd answers on its socket.
func (n *RealNode) waitContainerd(ctx context.Context, s *State) error {
	return poll(ctx, s, n.Name+" containerd socket", func(ctx context.Context) error {
		return run(ctx, "ctr", "--address="+n.Containerd, "version")
	})
}

func (n *RealNode) startKubelet(s *State, kubelet string, start startFunc) error {
	bin, args := n.inNode(kubelet)
	return start(n.procName("kubelet"), bin, append(args,
		"--config="+filepath.Join(n.Dir, "kubelet.yaml"),
		"--kubeconfig="+n.kubeconfig(s.StateDir),
		"--root-dir="+filepath.Join(n.Dir, "kubelet"),
		"--cert-dir="+filepath.Join(n.Dir, "kubelet", "pki"),
		"--hostname-override="+n.Name,
		"--node-ip="+n.IP,
		"--node-labels="+RealNodeLabel+"=true,"+zoneLabel+"="+n.Zone+",topology.kubernetes.io/region=local",
		"--register-with-taints="+RealNodeLabel+"=true:NoSchedule",
		"--v=1",
	)...)
}

func waitNodeReady(ctx context.Context, s *State, cs kubernetes.Interface, name string) error {
	return poll(ctx, s, "node "+name+" Ready", func(ctx context.Context) error {
		nd, err := cs.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if !nodeReady(nd) {
			return fmt.Errorf("node %s not ready", name)
		}
		return nil
	})
}

// clusterDNSService is the kube-dns Service in front of CoreDNS, which runs
// on this machine: its EndpointSlice names the control plane's address.
func clusterDNSService(ctx context.Context, cs kubernetes.Interface, dnsAddr string) error {
	_, p, _ := strings.Cut(dnsAddr, ":")
	port, err := strconv.Atoi(p)
	if err != nil {
		return fmt.Errorf("CoreDNS port of %s: %w", dnsAddr, err)
	}
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "kube-dns", Namespace: metav1.NamespaceSystem, Labels: map[string]string{"k8s-app": "kube-dns"}},
		Spec: corev1.ServiceSpec{
			ClusterIP: DNSServiceIP,
			Ports: []corev1.ServicePort{
				{Name: "dns", Protocol: corev1.ProtocolUDP, Port: 53, TargetPort: intstr.FromInt32(int32(port))},
				{Name: "dns-tcp", Protocol: corev1.ProtocolTCP, Port: 53, TargetPort: intstr.FromInt32(int32(port))},
			},
		},
	}
	if _, err := cs.CoreV1().Services(svc.Namespace).Create(ctx, svc, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create kube-dns Service: %w", err)
	}
	slice := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{
			Name: "kube-dns-local", Namespace: metav1.NamespaceSystem,
			Labels: map[string]string{discoveryv1.LabelServiceName: "kube-dns", discoveryv1.LabelManagedBy: "flock-cluster"},
		},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{ControlPlaneIP}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}}},
		Ports: []discoveryv1.EndpointPort{
			{Name: ptr.To("dns"), Protocol: ptr.To(corev1.ProtocolUDP), Port: ptr.To(int32(port))},
			{Name: ptr.To("dns-tcp"), Protocol: ptr.To(corev1.ProtocolTCP), Port: ptr.To(int32(port))},
		},
	}
	if _, err := cs.DiscoveryV1().EndpointSlices(slice.Namespace).Create(ctx, slice, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create kube-dns EndpointSlice: %w", err)
	}
	return nil
}

// LoadImages imports every OCI archive of dir (make images) into the node's
// containerd, unless the same archives were imported last time. "Same" is
// name, size and modification time: make images rewrites an archive only
// when its bytes change.
func (n *RealNode) LoadImages(ctx context.Context, dir string) error {
	tars, err := filepath.Glob(filepath.Join(dir, "*.tar"))
	if err != nil {
		return err
	}
	slices.Sort(tars)
	var stamps strings.Builder
	for _, t := range tars {
		fi, err := os.Stat(t)
		if err != nil {
			return fmt.Errorf("image archive: %w", err)
		}
		fmt.Fprintf(&stamps, "%s %d %d\n", filepath.Base(t), fi.Size(), fi.ModTime().UnixNano())
	}
	sum := stamps.String()
	stamp := filepath.Join(n.Dir, "images.sha256")
	if old, err := os.ReadFile(stamp); err == nil && string(old) == sum {
		return nil
	}
	for _, t := range tars {
		if err := run(ctx, "ctr", "--address="+n.Containerd, "--namespace=k8s.io", "images", "import",
			"--platform=linux/"+runtime.GOARCH, t); err != nil {
			return fmt.Errorf("%s: import image %s: %w", n.Name, filepath.Base(t), err)
		}
	}
	return os.WriteFile(stamp, []byte(sum), 0o644)
}

var containerdConfig = template.Must(template.New("containerd").Parse(`# containerd of the local cluster's real node {{.Name}} (flock-cluster).
version = 2
root = "{{.Dir}}/containerd/root"
state = "{{.RunDir}}/containerd-state"
disabled_plugins = ["io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.tracing.processor.v1.otlp", "io.containerd.internal.v1.tracing"]

[grpc]
  address = "{{.Containerd}}"

[ttrpc]
  address = "{{.Containerd}}.ttrpc"

[metrics]
  address = ""

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "{{.SandboxImage}}"
  # This machine lacks CAP_SYS_RESOURCE: without it every sandbox fails.
  restrict_oom_score_adj = true
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  enable_selinux = false
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "{{.Dir}}/cni/net.d"
`))

// cniConfig: pods on the node's bridge with addresses from its /24; no
// masquerade (nothing leaves the machine), portmap for hostPort.
var cniConfig = template.Must(template.New("cni").Parse(`{
  "cniVersion": "1.0.0",
  "name": "flock",
  "plugins": [
    {
      "type": "bridge",
      "bridge": "{{.Bridge}}",
      "isGateway": true,
      "ipMasq": false,
      "hairpinMode": true,
      "ipam": {
        "type": "host-local",
        "ranges": [[{"subnet": "{{.PodCIDR}}", "gateway": "{{.IP}}"}]],
        "routes": [{"dst": "0.0.0.0/0"}],
        "dataDir": "{{.Dir}}/cni/ipam"
      }
    },
    {"type": "portmap", "capabilities": {"portMappings": true}}
  ]
}
`))

// kubeletConfig: the settings this machine needs (cgroup v1 only, no
// CAP_SYS_RESOURCE, swap) and webhook authn/z against the apiserver.
var kubeletConfig = template.Must(template.New("kubelet").Parse(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: {{.IP}}
port: 10250
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: {{.HealthzPort}}
tlsCertFile: {{.PKI}}/kubelet-{{.Name}}.crt
tlsPrivateKeyFile: {{.PKI}}/kubelet-{{.Name}}.key
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: {{.PKI}}/ca.crt}
authorization: {mode: Webhook}
containerRuntimeEndpoint: unix://{{.Containerd}}
cgroupDriver: cgroupfs
cgroupsPerQOS: false
enforceNodeAllocatable: []
failCgroupV1: false
failSwapOn: false
clusterDNS: [{{.DNS}}]
clusterDomain: {{.Domain}}
resolvConf: {{.Dir}}/resolv.conf
podLogsDir: {{.Dir}}/pod-logs
serializeImagePulls: false
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard: {memory.available: 100Mi, nodefs.available: "1%", imagefs.available: "1%"}
maxPods: 110
nodeStatusReportFrequency: 10s
syncFrequency: 10s
shutdownGracePeriod: 0s
`))

// hostResolvConf is the "host" resolver pods with dnsPolicy Default get, and
// what ClusterFirst pods' search path is extended with: nothing, because
// nothing outside this machine can be resolved.
var hostResolvConf = template.Must(template.New("resolv").Parse("nameserver {{.DNS}}\n"))
