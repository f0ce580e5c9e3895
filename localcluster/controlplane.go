// Starting the control plane: etcd, kube-apiserver, the controller manager,
// the scheduler, kwok and CoreDNS, one step each.

package localcluster

import (
	"bytes"
	"context"
	_ "embed"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"text/template"
	"time"

	"k8s.io/client-go/kubernetes"
)

//go:embed kwok.yaml.tmpl
var kwokTemplate string

var kwokConfig = template.Must(template.New("kwok").Delims("[[", "]]").Parse(kwokTemplate))

// corefile serves the cluster domain and reverse zones from the API, with
// TTL 0 so tests see changes without cache delay. Other names are refused.
var corefile = template.Must(template.New("Corefile").Parse(`.:{{.Port}} {
    bind {{.Bind}}
    errors
    ready 127.0.0.1:{{.ReadyPort}}
    kubernetes {{.Domain}} in-addr.arpa ip6.arpa {
        kubeconfig {{.Kubeconfig}}
        pods insecure
        ttl 0
        fallthrough in-addr.arpa ip6.arpa
    }
}
`))

// controllers run by kube-controller-manager: what workloads, services,
// storage and simulated nodes need, nothing cloud-related.
var controllers = []string{
	"clusterrole-aggregation-controller",
	"cronjob-controller",
	"daemonset-controller",
	"deployment-controller",
	"disruption-controller",
	"endpoints-controller",
	"endpointslice-controller",
	"endpointslice-mirroring-controller",
	"ephemeral-volume-controller",
	"garbage-collector-controller",
	"job-controller",
	"namespace-controller",
	"node-lifecycle-controller",
	"persistentvolume-binder-controller",
	"persistentvolume-expander-controller",
	"persistentvolume-protection-controller",
	"persistentvolumeclaim-protection-controller",
	"pod-garbage-collector-controller",
	"replicaset-controller",
	"replicationcontroller-controller",
	"resourcequota-controller",
	"root-ca-certificate-publisher-controller",
	"service-cidr-controller",
	"serviceaccount-controller",
	"serviceaccount-token-controller",
	"statefulset-controller",
	"taint-eviction-controller",
	"ttl-after-finished-controller",
}

// start brings a fresh cluster up; on failure it stops what it started.
func start(ctx context.Context, o Options) (_ *State, err error) {
	bins, err := Binaries(o.CacheRoot)
	if err != nil {
		return nil, err
	}
	begin, step := time.Now(), stepper(o.Progress)
	fmt.Fprintf(o.Progress, "starting local cluster in %s\n", o.StateDir)
	if err := freshStateDir(o.StateDir); err != nil {
		return nil, err
	}
	nodes, skipped, err := prepareNodes(ctx, o)
	if err != nil {
		return nil, fmt.Errorf("real nodes: %w", err)
	}
	host := "127.0.0.1"
	if len(nodes) > 0 {
		host = ControlPlaneIP // pods reach the control plane on real-0's bridge
	} else {
		fmt.Fprintf(o.Progress, "  real nodes not started: %s\n", skipped)
	}
	p, err := FreePorts(8)
	if err != nil {
		return nil, err
	}
	b := &boot{o: o, host: host, cfgDir: filepath.Join(o.StateDir, "config"), ports: ports{
		etcd: p[0], etcdPeer: p[1], api: p[2], kcm: p[3], sched: p[4], kwok: p[5], dns: p[6], dnsReady: p[7],
	}}
	s := &State{
		StateDir:   o.StateDir,
		Kubeconfig: filepath.Join(o.StateDir, "admin.kubeconfig"),
		Server:     "https://" + host + ":" + strconv.Itoa(b.ports.api),
		DNSAddr:    "127.0.0.1:" + strconv.Itoa(b.ports.dns),
		Domain:     Domain,
		Nodes:      o.Nodes,
		Started:    time.Now(),

		RealNodes: nodes, RealNodeSkipped: skipped, ImagesDir: o.ImagesDir,
	}
	defer func() {
		if err != nil {
			s.stop(o.Log)
		}
	}()
	if len(nodes) > 0 {
		if err := s.save(); err != nil { // so that "down" undoes the node setup
			return nil, err
		}
	}
	if err := writePKI(o.StateDir, s.Server, clientIdentities); err != nil {
		return nil, err
	}
	startBin := s.starter(o.Log)
	b.run = func(name string, args ...string) error { return startBin(name, bins[name], args...) }

	if err := b.etcd(ctx, s); err != nil {
		return nil, err
	}
	step("etcd ready")
	cs, err := b.apiserver(ctx, s, len(nodes) > 0)
	if err != nil {
		return nil, err
	}
	step("kube-apiserver ready")
	if err := bootstrap(ctx, cs, o); err != nil {
		return nil, err
	}
	for _, start := range []func() error{b.controllerManager, b.scheduler, b.kwok, b.coredns} {
		if err := start(); err != nil {
			return nil, err
		}
	}
	if err := waitHTTP(ctx, s, "kube-scheduler", fmt.Sprintf("https://127.0.0.1:%d/healthz", b.ports.sched), true); err != nil {
		return nil, err
	}
	if err := waitHTTP(ctx, s, "kube-controller-manager", fmt.Sprintf("https://127.0.0.1:%d/healthz", b.ports.kcm), true); err != nil {
		return nil, err
	}
	step("scheduler and controllers healthy")
	if err := waitNodes(ctx, s, cs, o.Nodes); err != nil {
		return nil, err
	}
	if err := waitServiceAccount(ctx, s, cs, "default"); err != nil {
		return nil, err
	}
	step("nodes ready")
	if err := waitHTTP(ctx, s, "coredns", fmt.Sprintf("http://127.0.0.1:%d/ready", b.ports.dnsReady), false); err != nil {
		return nil, err
	}
	if err := waitDNS(ctx, s); err != nil {
		return nil, err
	}
	step("CoreDNS answering")
	if len(nodes) > 0 {
		if err := startNodes(ctx, s, o, cs, bins, startBin); err != nil {
			return nil, fmt.Errorf("real nodes: %w", err)
		}
	}
	fmt.Fprintf(o.Progress, "local cluster up in %.1fs; logs in %s\n", time.Since(begin).Seconds(), filepath.Join(o.StateDir, "logs"))
	return s, nil
}

// freshStateDir readies dir for a fresh start: no old data, keys, configs or
// ephemeral mark (the starter sets it again if it wants); logs of the
// previous run are kept with a .prev suffix.
func freshStateDir(dir string) error {
	if err := SetEphemeral(dir, false); err != nil {
		return err
	}
	for _, d := range []string{"etcd", "pki", "config"} {
		if err := os.RemoveAll(filepath.Join(dir, d)); err != nil {
			return fmt.Errorf("clean state dir: %w", err)
		}
	}
	if err := os.MkdirAll(filepath.Join(dir, "logs"), 0o755); err != nil {
		return fmt.Errorf("create log dir: %w", err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "config"), 0o700); err != nil {
		return fmt.Errorf("create config dir: %w", err)
	}
	return nil
}

// clientIdentities are the control plane's clients: kubeconfig path under
// the state directory -> user and groups of its client certificate.
var clientIdentities = map[string]clientIdentity{
	"admin.kubeconfig":                          {"flock-admin", []string{"system:masters"}},
	"config/kube-controller-manager.kubeconfig": {"system:kube-controller-manager", nil},
	"config/kube-scheduler.kubeconfig":          {"system:kube-scheduler", nil},
	"config/kwok.kubeconfig":                    {"flock-kwok", []string{"system:masters"}},
	"config/coredns.kubeconfig":                 {"flock-coredns", nil},
	"config/kube-proxy.kubeconfig":              {"system:kube-proxy", nil},
	"config/hostdir-provisioner.kubeconfig":     {"flock-hostdir-provisioner", []string{"system:masters"}},
}

// ports are the control plane's listening ports, free when it starts.
type ports struct{ etcd, etcdPeer, api, kcm, sched, kwok, dns, dnsReady int }

// boot is what starting the control plane's components shares.
type boot struct {
	o      Options
	host   string // the apiserver's address
	cfgDir string
	ports  ports
	run    func(name string, args ...string) error // starts a component, recorded in the State
}

func (b *boot) kubeconfig(name string) string { return filepath.Join(b.cfgDir, name+".kubeconfig") }
func (b *boot) pki(name string) string        { return filepath.Join(b.o.StateDir, "pki", name) }
func (b *boot) etcdURL() string               { return "http://127.0.0.1:" + strconv.Itoa(b.ports.etcd) }

// etcd starts etcd and waits until it is healthy.
func (b *boot) etcd(ctx context.Context, s *State) error {
	peer := "http://127.0.0.1:" + strconv.Itoa(b.ports.etcdPeer)
	if err := b.run("etcd",
		"--name=flock", "--data-dir="+filepath.Join(b.o.StateDir, "etcd"),
		"--listen-client-urls="+b.etcdURL(), "--advertise-client-urls="+b.etcdURL(),
		"--listen-peer-urls="+peer, "--initial-advertise-peer-urls="+peer,
		"--initial-cluster=flock="+peer,
		"--unsafe-no-fsync", // throwaway data; fsync only slows tests down
		// etcd compacts its own history: kube-apiserver compacts only 5
		// minutes after it starts, so with the campaign restarting it every
		// 3 minutes nothing ever did (run 8: 101k revisions, 301 MB, and
		// each restart took 39 s instead of 7-10 s).
		"--auto-compaction-mode=periodic", "--auto-compaction-retention=5m",
		"--log-level=warn",
	); err != nil {
		return err
	}
	return waitHTTP(ctx, s, "etcd", b.etcdURL()+"/health", false)
}

// apiserver starts kube-apiserver and returns a client once it serves.
func (b *boot) apiserver(ctx context.Context, s *State, realNodes bool) (kubernetes.Interface, error) {
	args := []string{
		"--etcd-servers=" + b.etcdURL(),
		"--bind-address=" + b.host, "--advertise-address=" + b.host, "--secure-port=" + strconv.Itoa(b.ports.api),
		"--tls-cert-file=" + b.pki("apiserver.crt"), "--tls-private-key-file=" + b.pki("apiserver.key"),
		"--client-ca-file=" + b.pki("ca.crt"),
		"--authorization-mode=Node,RBAC",
		"--kubelet-client-certificate=" + b.pki("apiserver-kubelet-client.crt"),
		"--kubelet-client-key=" + b.pki("apiserver-kubelet-client.key"),
		"--kubelet-certificate-authority=" + b.pki("ca.crt"),
		"--kubelet-preferred-address-types=InternalIP",
		"--service-account-issuer=https://kubernetes.default.svc." + Domain,
		"--service-account-key-file=" + b.pki("sa.pub"), "--service-account-signing-key-file=" + b.pki("sa.key"),
		"--service-cluster-ip-range=" + serviceCIDR,
		"--allow-privileged=true",
		"--profiling=false",
	}
	if !realNodes {
		// The default reconciler would publish 127.0.0.1 as the endpoint of
		// the kubernetes Service, which EndpointSlices reject.
		args = append(args, "--endpoint-reconciler-type=none")
	}
	if err := b.run("kube-apiserver", args...); err != nil {
		return nil, err
	}
	cs, err := s.client()
	if err != nil {
		return nil, err
	}
	if err := waitAPI(ctx, s, cs); err != nil {
		return nil, err
	}
	return cs, nil
}

func (b *boot) controllerManager() error {
	kc := b.kubeconfig("kube-controller-manager")
	return b.run("kube-controller-manager",
		"--kubeconfig="+kc, "--authentication-kubeconfig="+kc, "--authorization-kubeconfig="+kc,
		"--bind-address=127.0.0.1", "--secure-port="+strconv.Itoa(b.ports.kcm),
		"--leader-elect=false",
		"--use-service-account-credentials=true",
		"--service-account-private-key-file="+b.pki("sa.key"),
		"--root-ca-file="+b.pki("ca.crt"),
		"--controllers="+strings.Join(controllers, ","),
		"--profiling=false",
	)
}

func (b *boot) scheduler() error {
	kc := b.kubeconfig("kube-scheduler")
	return b.run("kube-scheduler",
		"--kubeconfig="+kc, "--authentication-kubeconfig="+kc, "--authorization-kubeconfig="+kc,
		"--bind-address=127.0.0.1", "--secure-port="+strconv.Itoa(b.ports.sched),
		"--leader-elect=false",
		"--profiling=false",
	)
}

// kwok starts kwok for the simulated nodes only: the real nodes' pods are
// their kubelets'.
func (b *boot) kwok() error {
	cfg := filepath.Join(b.cfgDir, "kwok.yaml")
	if err := writeTemplate(cfg, kwokConfig, map[string]any{
		"PodCIDR": PodCIDR, "ReadyDelayMillis": b.o.ReadyDelay.Milliseconds(),
	}); err != nil {
		return err
	}
	return b.run("kwok",
		"--kubeconfig="+b.kubeconfig("kwok"), "--config="+cfg,
		"--manage-all-nodes=false",
		"--manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake",
		"--server-address=127.0.0.1:"+strconv.Itoa(b.ports.kwok),
	)
}

// coredns starts CoreDNS serving the cluster domain from the API.
func (b *boot) coredns() error {
	cfg := filepath.Join(b.cfgDir, "Corefile")
	if err := writeTemplate(cfg, corefile, map[string]any{
		"Port": b.ports.dns, "ReadyPort": b.ports.dnsReady, "Domain": Domain, "Kubeconfig": b.kubeconfig("coredns"),
		"Bind": strings.Join(slices.Compact([]string{"127.0.0.1", b.host}), " "),
	}); err != nil {
		return err
	}
	return b.run("coredns", "-conf="+cfg)
}

// writeTemplate renders t with data into the file path.
func writeTemplate(path string, t *template.Template, data any) error {
	var buf bytes.Buffer
	if err := t.Execute(&buf, data); err != nil {
		return fmt.Errorf("render %s: %w", path, err)
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}
