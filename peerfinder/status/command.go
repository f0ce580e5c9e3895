package status

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/flockd/flock/internal/kube"
	"github.com/flockd/flock/internal/ordinal"
)

// Exit statuses of `peer-finder status`.
const (
	ExitAnswered    = 0 // every member's peer-finder answered
	ExitNotAnswered = 1 // a member did not (its row says why), or none matched, or the pods could not be listed
	ExitUsage       = 2 // bad command line
)

// Path is where a peer-finder serves its Document.
const Path = "/status"

// options are the command's flags.
type options struct {
	namespace, selector, output, port string
	kubeconfig, master                string
	timeout                           time.Duration
}

// newFlagSet returns the command's flags bound to o.
func newFlagSet(o *options, output io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("peer-finder status", flag.ContinueOnError)
	fs.SetOutput(output)
	for _, name := range []string{"n", "namespace"} {
		fs.StringVar(&o.namespace, name, "", "The workload's `namespace` (default: the kubeconfig context's, else the pod's own, else default).")
	}
	for _, name := range []string{"l", "selector"} {
		fs.StringVar(&o.selector, name, "", "Label `selector` of the workload's pods, e.g. app=zk (required).")
	}
	fs.StringVar(&o.output, "o", "table", "Output `format`: table (for people) or json (for scripts, docs/status.md).")
	fs.StringVar(&o.port, "port", "flock-metrics", "The pods' `port` where peer-finder serves -metrics-addr: a container port's name or a number.")
	fs.StringVar(&o.kubeconfig, "kubeconfig", "", "Path of a kubeconfig `file` (default: $KUBECONFIG, else ~/.kube/config, else in-cluster).")
	fs.StringVar(&o.master, "master", "", "The API server's `URL`, overriding the kubeconfig's.")
	fs.DurationVar(&o.timeout, "timeout", 10*time.Second, "How long to wait for each member's answer.")
	return fs
}

// PrintUsage writes the command's usage to w.
func PrintUsage(w io.Writer) {
	fs := newFlagSet(&options{}, w)
	fmt.Fprintf(w, "Usage: peer-finder status -l SELECTOR [-n NS] [-o table|json] [-port=metrics] [flags]\n\n"+
		"Lists the pods of a workload and asks each member's peer-finder (-metrics-addr) for its /status\n"+
		"through the API server's pods/proxy: the peers it delivered last, their generation, the bootstrap\n"+
		"role and former, the gate holding the next delivery back, and sink warnings. RBAC: list pods,\n"+
		"get pods/proxy (examples/status/rbac.yaml). Exit status 0 when every member answered, 1 otherwise, 2 for a bad command line.\n\nFlags:\n")
	fs.PrintDefaults()
}

// parse parses args into options; a usage error names the flag.
func parse(args []string, stderr io.Writer) (options, error) {
	var o options
	fs := newFlagSet(&o, stderr)
	fs.Usage = func() {}
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	switch {
	case fs.NArg() > 0:
		return o, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	case o.selector == "":
		return o, errors.New("-l: a label selector is required, e.g. -l app=zk")
	case o.output != "table" && o.output != "json":
		return o, fmt.Errorf("-o: %q is not table or json", o.output)
	case o.port == "":
		return o, errors.New("-port: empty")
	case o.timeout <= 0:
		return o, fmt.Errorf("-timeout: %v is not positive", o.timeout)
	}
	if _, err := labels.Parse(o.selector); err != nil {
		return o, fmt.Errorf("-l: %w", err)
	}
	return o, nil
}

// Main runs `peer-finder status` with args (after "status") and returns
// its exit status; getenv reads KUBECONFIG and HOME.
func Main(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	o, err := parse(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		PrintUsage(stdout)
		return ExitAnswered
	}
	if err != nil {
		fmt.Fprintf(stderr, "peer-finder status: %v\nRun 'peer-finder status -help' for usage.\n", err)
		return ExitUsage
	}
	c, ns, err := client(o, getenv)
	if err != nil {
		fmt.Fprintf(stderr, "peer-finder status: %v\n", err)
		return ExitNotAnswered
	}
	r, err := Collect(ctx, c, ns, o.selector, o.port, o.timeout)
	if err != nil {
		fmt.Fprintf(stderr, "peer-finder status: %v\n", err)
		return ExitNotAnswered
	}
	if o.output == "json" {
		err = WriteJSON(stdout, r)
	} else {
		err = WriteTable(stdout, r)
	}
	if err != nil {
		fmt.Fprintf(stderr, "peer-finder status: write: %v\n", err)
		return ExitNotAnswered
	}
	if len(r.Members) == 0 {
		fmt.Fprintf(stderr, "peer-finder status: no pods in namespace %s match %s\n", ns, o.selector)
	}
	if !r.Answered() {
		return ExitNotAnswered
	}
	return ExitAnswered
}

// client builds the API client and the namespace from the flags and the
// kubeconfig (as kubectl finds it), or in-cluster.
func client(o options, getenv func(string) string) (*kube.Client, string, error) {
	rules := &clientcmd.ClientConfigLoadingRules{ExplicitPath: o.kubeconfig}
	if o.kubeconfig == "" {
		rules.Precedence = filepath.SplitList(getenv("KUBECONFIG"))
		if len(rules.Precedence) == 0 && getenv("HOME") != "" {
			rules.Precedence = []string{filepath.Join(getenv("HOME"), ".kube", "config")}
		}
	}
	overrides := &clientcmd.ConfigOverrides{}
	overrides.ClusterInfo.Server = o.master
	overrides.Context.Namespace = o.namespace
	cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, overrides)
	cfg, err := cc.ClientConfig()
	if err != nil {
		return nil, "", fmt.Errorf("kubernetes client config: %w", err)
	}
	ns, _, err := cc.Namespace()
	if err != nil {
		return nil, "", fmt.Errorf("namespace from the kubeconfig: %w", err)
	}
	cfg.UserAgent = kube.UserAgent + "-status"
	c, err := kube.NewClientForConfig(cfg)
	if err != nil {
		return nil, "", err
	}
	return c, ns, nil
}

// Collect lists the pods of ns matching selector and asks each running
// one's peer-finder for its Document at port through pods/proxy, at most
// 8 at once and each within timeout. A member that does not answer is a
// row with the reason; only a failed list is an error. Members come in
// ordinal order, pods without an ordinal last.
func Collect(ctx context.Context, c *kube.Client, ns, selector, port string, timeout time.Duration) (Report, error) {
	pods, err := c.Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		return Report{}, fmt.Errorf("list pods %s in %s: %w", selector, ns, err)
	}
	items := pods.Items
	slices.SortFunc(items, func(a, b corev1.Pod) int { return memberOrder(a.Name, b.Name) })
	r := Report{Version: ReportVersion, Namespace: ns, Selector: selector, Members: make([]Member, len(items))}
	proxy := c.PodProxy(ns)
	var wg sync.WaitGroup
	slots := make(chan struct{}, 8)
	for i := range items {
		r.Members[i] = memberOf(&items[i])
		n, err := proxyPort(&items[i], port)
		if err != nil {
			r.Members[i].Error = err.Error()
			continue
		}
		wg.Add(1)
		go func(m *Member) {
			defer wg.Done()
			slots <- struct{}{}
			defer func() { <-slots }()
			ctx, cancel := context.WithTimeout(ctx, timeout)
			defer cancel()
			m.Status, m.Error = ask(ctx, proxy, m.Pod, n)
		}(&r.Members[i])
	}
	wg.Wait()
	return r, nil
}

// memberOrder orders pods by ordinal (web-2 before web-10), those without
// one last, then by name.
func memberOrder(a, b string) int {
	rank := func(name string) int {
		if n := ordinal.FromName(name); n >= 0 {
			return n
		}
		return math.MaxInt
	}
	return cmp.Or(cmp.Compare(rank(a), rank(b)), cmp.Compare(a, b))
}

// ask fetches and decodes pod's Document, or says why it cannot.
func ask(ctx context.Context, proxy kube.PodProxy, pod string, port int32) (*Document, string) {
	b, err := proxy.Get(ctx, pod, port, Path)
	if err != nil {
		return nil, describe(err, port)
	}
	var d Document
	if err := json.Unmarshal(b, &d); err != nil {
		return nil, fmt.Sprintf("port %d/status: not a status document: %v", port, err)
	}
	if d.Version != DocumentVersion {
		return nil, fmt.Sprintf("port %d/status: document version %d, this command reads %d", port, d.Version, DocumentVersion)
	}
	return &d, ""
}

// describe says why a member did not answer, with what the API server
// relayed (the pod's answer, or why it could not reach it).
func describe(err error, port int32) string {
	var st apierrors.APIStatus
	if !errors.As(err, &st) {
		return err.Error()
	}
	s := st.Status()
	var relayed []string
	if s.Details != nil {
		for _, c := range s.Details.Causes {
			relayed = append(relayed, strings.TrimSpace(c.Message))
		}
	}
	msg := s.Message
	switch {
	case apierrors.IsForbidden(err):
		if !strings.Contains(msg, "forbidden") { // the API server's JSON Status, not always decoded
			msg = "forbidden: " + strings.TrimSpace(msg)
		}
		return msg + " (see examples/status/rbac.yaml)"
	case apierrors.IsNotFound(err) && len(relayed) > 0:
		msg = fmt.Sprintf("port %d has no /status: a peer-finder older than this command, or -port names another server", port)
	}
	if len(relayed) > 0 {
		msg += ": " + strings.Join(relayed, "; ")
	}
	return msg
}
