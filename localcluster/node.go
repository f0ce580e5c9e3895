package localcluster

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
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

// The real node: one kubelet with containerd, runc and CNI on this machine,
// beside the simulated nodes. Its addresses are fixed, so there is at most
// one per machine (see claimNode).
const (
	// RealNodeName is the real node's Node name.
	RealNodeName = "real-0"
	// RealNodeLabel is the label (value "true") and NoSchedule taint key of
	// the real node: only pods that select and tolerate it land there.
	RealNodeLabel = "node.flockd.io/real"
	// RealNodeIP is the node's address, on its own bridge; the control plane
	// listens there too when the node runs, so pods reach it.
	RealNodeIP = "10.245.0.1"
	// DNSServiceIP is the kube-dns Service (CoreDNS), the kubelet's clusterDNS.
	DNSServiceIP = "10.96.0.10"

	realPodCIDR = "10.245.0.0/24"
	nodeBridge  = "flock0"
	nodeTable   = "flock_node" // our nftables table (inet family)
	// nodeRunDir holds what must be short or machine-wide: sockets, the owner
	// record and its lock.
	nodeRunDir = "/run/flock-node"
)

// RealNodeMode says whether Up starts the real node.
type RealNodeMode string

const (
	// RealNodeAuto starts it when running as root and no other cluster on this
	// machine has it; otherwise the cluster runs without it and says why.
	RealNodeAuto RealNodeMode = "auto"
	// RealNodeOff never starts it.
	RealNodeOff RealNodeMode = "off"
)

// RealNodeFromEnv is the mode $FLOCK_REAL_NODE asks for: "0" or "off" turn
// the real node off, anything else is auto.
func RealNodeFromEnv() RealNodeMode {
	switch os.Getenv("FLOCK_REAL_NODE") {
	case "0", "off", "false":
		return RealNodeOff
	}
	return RealNodeAuto
}

// RealNode describes a running real node.
type RealNode struct {
	Name       string `json:"name"`
	IP         string `json:"ip"`
	Dir        string `json:"dir"`        // kubelet root, containerd root, configs
	Containerd string `json:"containerd"` // containerd socket path
	// IPForward is net.ipv4.ip_forward before Up set it, restored by Down.
	IPForward string `json:"ipForward"`
}

// nodePackages are the Debian packages the real node runs on, by a file each
// provides; Build installs the missing ones.
var nodePackages = []struct{ pkg, file string }{
	{"runc", "/usr/sbin/runc"},
	{"containerd", "/usr/bin/containerd"},
	{"containernetworking-plugins", "/usr/lib/cni/bridge"},
	{"nftables", "/usr/sbin/nft"},
	{"iptables", "/usr/sbin/iptables"},
	{"conntrack", "/usr/sbin/conntrack"},
	{"iproute2", "/usr/sbin/ip"},
}

// InstallNodePackages installs the real node's Debian packages that are
// missing. Without root or apt-get it only reports what is missing.
func InstallNodePackages(ctx context.Context, progress io.Writer) error {
	var missing []string
	for _, p := range nodePackages {
		if _, err := os.Stat(p.file); err != nil {
			missing = append(missing, p.pkg)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	if os.Geteuid() != 0 {
		fmt.Fprintf(progress, "real node: needs root to install %s; the cluster will run without it\n", strings.Join(missing, " "))
		return nil
	}
	if _, err := exec.LookPath("apt-get"); err != nil {
		fmt.Fprintf(progress, "real node: no apt-get to install %s; the cluster will run without it\n", strings.Join(missing, " "))
		return nil
	}
	fmt.Fprintf(progress, "installing the real node's packages: %s\n", strings.Join(missing, " "))
	install := func() error {
		args := append([]string{"install", "-y", "--no-install-recommends"}, missing...)
		cmd := exec.CommandContext(ctx, "apt-get", args...)
		cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
		cmd.Stdout, cmd.Stderr = progress, progress
		return cmd.Run()
	}
	if install() == nil {
		return nil
	}
	update := exec.CommandContext(ctx, "apt-get", "update")
	update.Stdout, update.Stderr = progress, progress
	if err := update.Run(); err != nil {
		return fmt.Errorf("apt-get update: %w", err)
	}
	if err := install(); err != nil {
		return fmt.Errorf("install %s: %w", strings.Join(missing, " "), err)
	}
	return nil
}

// nodeUnavailable says why this process cannot run the real node, or "".
func nodeUnavailable(o Options) string {
	if o.RealNode == RealNodeOff {
		return "turned off (FLOCK_REAL_NODE=0 or -real-node=off)"
	}
	if os.Geteuid() != 0 {
		return "needs root"
	}
	for _, p := range nodePackages {
		if _, err := os.Stat(p.file); err != nil {
			return fmt.Sprintf("%s is missing (package %s; \"make cluster-build\" as root installs it)", p.file, p.pkg)
		}
	}
	if o.ImagesDir == "" {
		return "no images dir"
	}
	if _, err := os.Stat(filepath.Join(o.ImagesDir, "pause.tar")); err != nil {
		return fmt.Sprintf("no %s (run \"make images\")", filepath.Join(o.ImagesDir, "pause.tar"))
	}
	return ""
}

// ownerFile records which state dir's cluster holds the machine's real node.
var ownerFile = filepath.Join(nodeRunDir, "owner")

// claimNode makes stateDir the owner of the machine's real node, unless a
// live cluster of another state dir holds it (busy is then its state dir).
// Leftovers of an owner that is gone are cleaned up first. The caller holds
// lockNode.
func claimNode(stateDir string) (busy string, err error) {
	b, err := os.ReadFile(ownerFile)
	if err == nil {
		prev := strings.TrimSpace(string(b))
		if prev != stateDir {
			if s, err := Load(prev); err == nil && s.RealNode != nil {
				return prev, nil
			}
		}
		cleanupNode(prev)
	} else if !errors.Is(err, os.ErrNotExist) {
		return "", fmt.Errorf("read real node owner: %w", err)
	}
	cleanupNode(stateDir)
	if err := os.WriteFile(ownerFile, []byte(stateDir+"\n"), 0o644); err != nil {
		return "", fmt.Errorf("record real node owner: %w", err)
	}
	return "", nil
}

// lockNode serializes the machine's clusters around the real node.
func lockNode(ctx context.Context) (func(), error) {
	if err := os.MkdirAll(nodeRunDir, 0o755); err != nil {
		return nil, fmt.Errorf("create %s: %w", nodeRunDir, err)
	}
	return lockFile(ctx, filepath.Join(nodeRunDir, "lock"), syscall.LOCK_EX)
}

// prepareNode claims the real node and sets up its network before the
// control plane starts, which then listens on RealNodeIP. It returns nil and
// a reason when the cluster runs without it.
func prepareNode(ctx context.Context, o Options) (_ *RealNode, skipped string, err error) {
	if why := nodeUnavailable(o); why != "" {
		return nil, why, nil
	}
	unlock, err := lockNode(ctx)
	if err != nil {
		return nil, "", err
	}
	defer unlock()
	busy, err := claimNode(o.StateDir)
	if err != nil {
		return nil, "", err
	}
	if busy != "" {
		return nil, "in use by the cluster in " + busy, nil
	}
	n := &RealNode{
		Name: RealNodeName, IP: RealNodeIP,
		Dir:        filepath.Join(o.StateDir, "node"),
		Containerd: filepath.Join(nodeRunDir, "containerd.sock"),
	}
	if err := os.RemoveAll(n.Dir); err != nil {
		return nil, "", fmt.Errorf("clean real node dir: %w", err)
	}
	fwd, err := os.ReadFile("/proc/sys/net/ipv4/ip_forward")
	if err != nil {
		return nil, "", fmt.Errorf("read ip_forward: %w", err)
	}
	n.IPForward = strings.TrimSpace(string(fwd))
	if err := os.MkdirAll(n.Dir, 0o755); err != nil {
		return nil, "", fmt.Errorf("create real node dir: %w", err)
	}
	// Recorded before anything is set up, so that Down undoes a half setup.
	if err := writeJSON(filepath.Join(n.Dir, "node.json"), n); err != nil {
		return nil, "", err
	}
	for _, c := range [][]string{
		{"ip", "link", "add", nodeBridge, "type", "bridge"},
		{"ip", "addr", "add", RealNodeIP + "/24", "dev", nodeBridge},
		{"ip", "link", "set", nodeBridge, "up"},
	} {
		if err := run(ctx, c...); err != nil {
			return nil, "", err
		}
	}
	// Pods reach services (and each other through them) only with these;
	// the forward rule below keeps their traffic on the bridge.
	for file, v := range map[string]string{
		"/proc/sys/net/ipv4/ip_forward":                "1",
		"/proc/sys/net/bridge/bridge-nf-call-iptables": "1",
	} {
		if err := os.WriteFile(file, []byte(v), 0o644); err != nil {
			return nil, "", fmt.Errorf("set %s: %w", file, err)
		}
	}
	if err := nft(ctx, nodeRules); err != nil {
		return nil, "", err
	}
	return n, "", nil
}

// nodeRules keep pod traffic on this machine: nothing forwarded from the
// bridge leaves through another interface (no masquerade is set up either).
var nodeRules = `table inet ` + nodeTable + ` {
	chain forward {
		type filter hook forward priority filter; policy accept;
		iifname "` + nodeBridge + `" oifname != "` + nodeBridge + `" counter drop
		oifname "` + nodeBridge + `" iifname != { "` + nodeBridge + `", "lo" } counter drop
	}
}
`

// nodeConfig is what the node's config templates need.
type nodeConfig struct {
	Dir, RunDir, Socket, StateDir, PKI   string
	NodeIP, PodCIDR, Bridge, DNS, Domain string
	HealthzPort, ProxyHealthz, ProxyMetr int
	SandboxImage                         string
}

// startNode starts containerd, the kubelet and kube-proxy, loads the images
// and waits until the node is Ready.
func startNode(ctx context.Context, s *State, o Options, cs kubernetes.Interface, start func(name string, args ...string) error) error {
	n := s.RealNode
	ports, err := FreePorts(3)
	if err != nil {
		return err
	}
	c := nodeConfig{
		Dir: n.Dir, RunDir: nodeRunDir, Socket: n.Containerd, StateDir: s.StateDir,
		PKI: filepath.Join(s.StateDir, "pki"), NodeIP: n.IP, PodCIDR: realPodCIDR, Bridge: nodeBridge,
		DNS: DNSServiceIP, Domain: Domain,
		HealthzPort: ports[0], ProxyHealthz: ports[1], ProxyMetr: ports[2],
		SandboxImage: "ghcr.io/flockd/pause:dev",
	}
	for _, d := range []string{"cni/net.d", "cni/ipam", "kubelet", "pod-logs", "containerd/root"} {
		if err := os.MkdirAll(filepath.Join(n.Dir, d), 0o755); err != nil {
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
	begin := time.Now()
	step := func(what string) { fmt.Fprintf(o.Progress, "  %-36s %5.1fs\n", what, time.Since(begin).Seconds()) }
	if err := start("containerd", "--config="+filepath.Join(n.Dir, "containerd.toml")); err != nil {
		return err
	}
	if err := poll(ctx, s, "containerd socket", func(ctx context.Context) error {
		return run(ctx, "ctr", "--address="+n.Containerd, "version")
	}); err != nil {
		return err
	}
	if err := n.LoadImages(ctx, o.ImagesDir); err != nil {
		return err
	}
	step("real node: containerd, images")
	kc := filepath.Join(s.StateDir, "config")
	if err := start("kubelet",
		"--config="+filepath.Join(n.Dir, "kubelet.yaml"),
		"--kubeconfig="+filepath.Join(kc, "kubelet.kubeconfig"),
		"--root-dir="+filepath.Join(n.Dir, "kubelet"),
		"--cert-dir="+filepath.Join(n.Dir, "kubelet", "pki"),
		"--hostname-override="+n.Name,
		"--node-ip="+n.IP,
		"--node-labels="+RealNodeLabel+"=true",
		"--register-with-taints="+RealNodeLabel+"=true:NoSchedule",
		"--v=1",
	); err != nil {
		return err
	}
	if err := start("kube-proxy",
		"--kubeconfig="+filepath.Join(kc, "kube-proxy.kubeconfig"),
		"--hostname-override="+n.Name,
		"--proxy-mode=nftables",
		"--cluster-cidr="+realPodCIDR,
		"--nodeport-addresses="+realPodCIDR,
		"--healthz-bind-address=127.0.0.1:"+strconv.Itoa(c.ProxyHealthz),
		"--metrics-bind-address=127.0.0.1:"+strconv.Itoa(c.ProxyMetr),
		"--conntrack-max-per-core=0",
		"--conntrack-tcp-timeout-established=0",
		"--conntrack-tcp-timeout-close-wait=0",
	); err != nil {
		return err
	}
	if err := clusterDNSService(ctx, cs, s.DNSAddr); err != nil {
		return err
	}
	if err := poll(ctx, s, "real node Ready", func(ctx context.Context) error {
		nd, err := cs.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if !nodeReady(nd) {
			return fmt.Errorf("node %s not ready", n.Name)
		}
		return nil
	}); err != nil {
		return err
	}
	if err := waitHTTP(ctx, s, "kube-proxy", fmt.Sprintf("http://127.0.0.1:%d/healthz", c.ProxyHealthz), false); err != nil {
		return err
	}
	if err := startStorage(ctx, s, cs, start); err != nil {
		return err
	}
	step("real node ready")
	return nil
}

// clusterDNSService is the kube-dns Service in front of CoreDNS, which runs
// on this machine: its EndpointSlice names the node's address.
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
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{RealNodeIP}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}}},
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
			return fmt.Errorf("import image %s: %w", filepath.Base(t), err)
		}
	}
	return os.WriteFile(stamp, []byte(sum), 0o644)
}

// cleanupNode undoes everything a real node of stateDir may have left: its
// processes and their containers, mounts, network namespaces, the bridge,
// firewall rules, sysctls. Errors are ignored: each step is best effort and
// safe to repeat, and Up runs it again before a new start.
func cleanupNode(stateDir string) {
	dir := filepath.Join(stateDir, "node")
	var n RealNode
	if b, err := os.ReadFile(filepath.Join(dir, "node.json")); err == nil {
		_ = json.Unmarshal(b, &n)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// Processes of this node (kubelet, kube-proxy, containerd) and the
	// containerd shims with everything they started.
	sock := filepath.Join(nodeRunDir, "containerd.sock")
	for _, pid := range pidsMatching(func(cmdline string) bool {
		return strings.Contains(cmdline, dir+string(filepath.Separator)) || strings.Contains(cmdline, sock)
	}) {
		killTree(pid)
	}
	// Mounts below the node dir and the CNI network namespaces, deepest first.
	for _, m := range mountsMatching(func(p string) bool {
		return strings.HasPrefix(p, dir+string(filepath.Separator)) || strings.HasPrefix(p, "/run/netns/cni-") ||
			strings.HasPrefix(p, filepath.Join(nodeRunDir, "containerd-state")+string(filepath.Separator))
	}) {
		_ = syscall.Unmount(m, syscall.MNT_DETACH)
	}
	ns, _ := filepath.Glob("/run/netns/cni-*")
	for _, p := range ns {
		_ = os.Remove(p)
	}
	_ = run(ctx, "ip", "link", "del", nodeBridge)
	_ = run(ctx, "nft", "delete", "table", "inet", nodeTable)
	// kube-proxy's own tables.
	for _, fam := range []string{"ip", "ip6"} {
		_ = run(ctx, "nft", "delete", "table", fam, "kube-proxy")
	}
	// iptables chains of CNI portmap (CNI-*) and the kubelet's canaries (KUBE-*).
	for _, cmd := range []string{"iptables", "ip6tables"} {
		for _, table := range []string{"nat", "filter", "mangle"} {
			out, err := exec.CommandContext(ctx, cmd, "-t", table, "-S").Output()
			if err == nil {
				cleanupChains(ctx, cmd, table, string(out))
			}
		}
	}
	if n.IPForward != "" {
		_ = os.WriteFile("/proc/sys/net/ipv4/ip_forward", []byte(n.IPForward), 0o644)
	}
	_ = os.RemoveAll(filepath.Join(nodeRunDir, "containerd-state"))
	_ = os.Remove(sock)
	_ = os.Remove(sock + ".ttrpc")
}

// ourChain reports whether an iptables chain is one the node's CNI plugins
// or kubelet create.
func ourChain(name string) bool {
	return strings.HasPrefix(name, "CNI-") || strings.HasPrefix(name, "KUBE-")
}

// cleanupChains deletes the rules jumping to our chains and then the chains
// themselves, from "cmd -t table -S" output.
func cleanupChains(ctx context.Context, cmd, table, rules string) {
	var chains []string
	for _, line := range strings.Split(rules, "\n") {
		f := strings.Fields(line)
		switch {
		case len(f) >= 2 && f[0] == "-N" && ourChain(f[1]):
			chains = append(chains, f[1])
		case len(f) > 2 && f[0] == "-A" && !ourChain(f[1]) && slices.ContainsFunc(f[2:], ourChain):
			_ = run(ctx, append([]string{cmd, "-t", table, "-D"}, f[1:]...)...)
		}
	}
	for _, c := range chains {
		_ = run(ctx, cmd, "-t", table, "-F", c)
	}
	for _, c := range chains {
		_ = run(ctx, cmd, "-t", table, "-X", c)
	}
}

// pidsMatching lists the processes whose command line matches.
func pidsMatching(match func(cmdline string) bool) []int {
	ents, _ := os.ReadDir("/proc")
	var pids []int
	self := os.Getpid()
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err != nil || len(b) == 0 {
			continue
		}
		if match(string(bytes.ReplaceAll(b, []byte{0}, []byte{' '}))) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// killTree SIGKILLs pid's descendants, then pid.
func killTree(pid int) {
	children, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", pid, pid))
	for _, c := range strings.Fields(string(children)) {
		if cp, err := strconv.Atoi(c); err == nil {
			killTree(cp)
		}
	}
	_ = syscall.Kill(pid, syscall.SIGKILL)
}

// mountsMatching lists mount points that match, deepest first.
func mountsMatching(match func(path string) bool) []string {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil
	}
	var out []string
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 5 {
			continue
		}
		p := unescapeMount(f[4])
		if match(p) {
			out = append(out, p)
		}
	}
	// Deepest first; equal paths (stacked mounts) side by side for Compact.
	slices.SortFunc(out, func(a, b string) int {
		if d := strings.Count(b, "/") - strings.Count(a, "/"); d != 0 {
			return d
		}
		return strings.Compare(a, b)
	})
	return slices.Compact(out)
}

// unescapeMount decodes the octal escapes (\040 for space) of mountinfo.
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func run(ctx context.Context, argv ...string) error {
	out, err := exec.CommandContext(ctx, argv[0], argv[1:]...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s: %w: %s", strings.Join(argv, " "), err, bytes.TrimSpace(out))
	}
	return nil
}

func nft(ctx context.Context, rules string) error {
	cmd := exec.CommandContext(ctx, "nft", "-f", "-")
	cmd.Stdin = strings.NewReader(rules)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("nft: %w: %s", err, bytes.TrimSpace(out))
	}
	return nil
}

func writeJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("encode %s: %w", filepath.Base(path), err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

var containerdConfig = template.Must(template.New("containerd").Parse(`# containerd of the local cluster's real node (flock-cluster).
version = 2
root = "{{.Dir}}/containerd/root"
state = "{{.RunDir}}/containerd-state"
disabled_plugins = ["io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.tracing.processor.v1.otlp", "io.containerd.internal.v1.tracing"]

[grpc]
  address = "{{.Socket}}"

[ttrpc]
  address = "{{.Socket}}.ttrpc"

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
        "ranges": [[{"subnet": "{{.PodCIDR}}", "gateway": "{{.NodeIP}}"}]],
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
address: {{.NodeIP}}
port: 10250
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: {{.HealthzPort}}
tlsCertFile: {{.PKI}}/kubelet.crt
tlsPrivateKeyFile: {{.PKI}}/kubelet.key
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: {{.PKI}}/ca.crt}
authorization: {mode: Webhook}
containerRuntimeEndpoint: unix://{{.Socket}}
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

// releaseNode cleans up the real node of stateDir and gives up its claim.
func releaseNode(stateDir string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	unlock, err := lockNode(ctx)
	if err != nil {
		return err
	}
	defer unlock()
	cleanupNode(stateDir)
	if b, err := os.ReadFile(ownerFile); err == nil && strings.TrimSpace(string(b)) == stateDir {
		if err := os.Remove(ownerFile); err != nil {
			return fmt.Errorf("release real node: %w", err)
		}
	}
	return nil
}

func nodePackageFile(pkg string) string {
	for _, p := range nodePackages {
		if p.pkg == pkg {
			return p.file
		}
	}
	panic("unknown node package " + pkg)
}
