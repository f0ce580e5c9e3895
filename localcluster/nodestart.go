// Starting the real nodes: each node's containerd and kubelet, configured
// from the templates here, and the wait until the apiserver sees it Ready.

package localcluster

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"text/template"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/ptr"
)

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
		SandboxImage: PauseImage,
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
		if err := writeTemplate(filepath.Join(n.Dir, file), tmpl, c); err != nil {
			return err
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

// waitContainerd waits until the node's containerd serves the CRI, as the
// kubelet requires at its start. containerd answers on its socket before
// its CRI plugin is initialized ("server is not initialized yet"), which
// after a kill takes as long as cleaning up the dead node's containers:
// a kubelet started then exits.
func (n *RealNode) waitContainerd(ctx context.Context, s *State) error {
	return poll(ctx, s, n.Name+" containerd CRI", func(ctx context.Context) error {
		return criReady(ctx, n.Containerd)
	})
}

// criReady asks the CRI runtime service at socket for its version, the
// kubelet's own first call.
func criReady(ctx context.Context, socket string) error {
	conn, err := grpc.NewClient("unix://"+socket, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	_, err = runtimeapi.NewRuntimeServiceClient(conn).Version(ctx, &runtimeapi.VersionRequest{})
	return err
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

// hostResolvConf is the "host" resolver pods with dnsPolicy Default get, and
// what ClusterFirst pods' search path is extended with: nothing, because
// nothing outside this machine can be resolved.
var hostResolvConf = template.Must(template.New("resolv").Parse("nameserver {{.DNS}}\n"))

// The real nodes' configuration files, templates over a RealNode (and, for
// the kubelet, the cluster's addresses): containerd's config; the CNI
// network (pods on the node's bridge with addresses from its /24, no
// masquerade since nothing leaves the machine, portmap for hostPort); the
// kubelet's config (the settings this machine needs: cgroup v1 only, no
// CAP_SYS_RESOURCE, swap; webhook authn/z against the apiserver).
var (
	//go:embed containerd.toml.tmpl
	containerdTemplate string
	//go:embed cni.conflist.tmpl
	cniTemplate string
	//go:embed kubelet.yaml.tmpl
	kubeletTemplate string

	containerdConfig = template.Must(template.New("containerd").Parse(containerdTemplate))
	cniConfig        = template.Must(template.New("cni").Parse(cniTemplate))
	kubeletConfig    = template.Must(template.New("kubelet").Parse(kubeletTemplate))
)
