// Package hostsfile tests peer-finder's hosts-file sink end to end on the
// real local cluster (kube-apiserver, the Job and StatefulSet controllers,
// kwok pods): one shared file written by the Lease holder only, the
// multi-role batch job of DESIGN §2, and the manifests under examples/,
// applied to the API server and run with exactly their containers' args.
//
// peer-finder runs as real processes of the built binary, one per simulated
// pod, "as that pod": its $POD_NAME and $POD_NAMESPACE, its host name, its
// ServiceAccount's token. kwok runs no containers, so the test plays the
// kubelet's part: it starts the processes, maps the containers' volume
// mounts (and the kubelet-managed /etc/hosts) to per-pod directories, and
// passes -kubeconfig and -domain where a pod has its in-cluster config and
// resolv.conf.
package hostsfile

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/flockd/flock/internal/testing/await"
	"github.com/flockd/flock/internal/testing/pfbinary"
	"github.com/flockd/flock/localcluster/clustertest"
	hf "github.com/flockd/flock/peerfinder/sink/hostsfile"
)

const wait = 90 * time.Second // bounds a hang; not a performance assertion

var binary string

func TestMain(m *testing.M) {
	path, cleanup := pfbinary.Build()
	binary = path
	code := m.Run()
	cleanup()
	os.Exit(code)
}

// proc is one running peer-finder process.
type proc = pfbinary.Process

// start runs peer-finder with argv and env (KEY=VALUE; PATH and HOME are
// added) and stops it in t.Cleanup (SIGTERM, SIGKILL after 15s), logging
// its output when the test failed.
func start(t *testing.T, name string, argv, env []string) *proc {
	t.Helper()
	env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME")}, env...)
	return pfbinary.Start(t, name, binary, argv, pfbinary.Options{Env: env, Grace: 15 * time.Second})
}

// eventually polls cond every 50ms until it holds, failing after wait with
// what and cond's last why.
func eventually(t *testing.T, what string, cond func() (bool, string)) {
	t.Helper()
	await.Poll{Timeout: wait, Every: 50 * time.Millisecond}.Check(t, func() error {
		if ok, why := cond(); !ok {
			return errors.New(why)
		}
		return nil
	}, "%s", what)
}

// podsBy waits until exactly n running pods with IPs match selector and
// returns them sorted by name.
func podsBy(t *testing.T, c kubernetes.Interface, ns, selector string, n int) []corev1.Pod {
	t.Helper()
	var out []corev1.Pod
	eventually(t, fmt.Sprintf("%d running pods %s", n, selector), func() (bool, string) {
		l, err := c.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: selector})
		if err != nil {
			return false, err.Error()
		}
		out = out[:0]
		for _, p := range l.Items {
			if p.Status.Phase == corev1.PodRunning && p.Status.PodIP != "" && p.DeletionTimestamp == nil {
				out = append(out, p)
			}
		}
		return len(out) == n, fmt.Sprintf("%d running of %d", len(out), len(l.Items))
	})
	slices.SortFunc(out, func(a, b corev1.Pod) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// kubeconfigFor writes a kubeconfig that authenticates as ServiceAccount sa
// in ns (what a pod of that account has in-cluster) and returns its path.
func kubeconfigFor(t *testing.T, c *clustertest.Cluster, ns, sa string) string {
	t.Helper()
	expiry := int64(3600)
	tok, err := c.Client.CoreV1().ServiceAccounts(ns).CreateToken(context.Background(), sa, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &expiry},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("token for ServiceAccount %s/%s: %v", ns, sa, err)
	}
	ca := c.Config.CAData
	if len(ca) == 0 && c.Config.CAFile != "" {
		if ca, err = os.ReadFile(c.Config.CAFile); err != nil {
			t.Fatal(err)
		}
	}
	kc := clientcmdapi.NewConfig()
	kc.Clusters["local"] = &clientcmdapi.Cluster{Server: c.Config.Host, CertificateAuthorityData: ca}
	kc.AuthInfos[sa] = &clientcmdapi.AuthInfo{Token: tok.Status.Token}
	kc.Contexts["pod"] = &clientcmdapi.Context{Cluster: "local", AuthInfo: sa, Namespace: ns}
	kc.CurrentContext = "pod"
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// kubeletHosts is what the kubelet writes into a pod's /etc/hosts; the
// peer-finder block must leave it alone.
func kubeletHosts(pod *corev1.Pod) string {
	host := pod.Spec.Hostname
	if host == "" {
		host = pod.Name
	}
	fqdn := host
	if pod.Spec.Subdomain != "" {
		fqdn = host + "." + pod.Spec.Subdomain + "." + pod.Namespace + ".svc.cluster.local"
	}
	return "# Kubernetes-managed hosts file.\n127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n" +
		"fe00::0\tip6-localnet\nfe00::1\tip6-allnodes\n" + pod.Status.PodIP + "\t" + fqdn + "\t" + host + "\n"
}

// hostsEntries reads path and returns the managed block id as name -> IP
// (one address per name in these tests) and the bytes outside the block.
// A missing file or block gives no entries.
func hostsEntries(path, id string) (map[string]string, string, error) {
	content, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, "", nil
	}
	if err != nil {
		return nil, "", err
	}
	m, outside, _, err := parseHosts(content, id)
	return m, outside, err
}

// parseHosts is hostsEntries on a content; found tells whether the block
// is there.
func parseHosts(content []byte, id string) (_ map[string]string, outside string, found bool, _ error) {
	entries, found, err := hf.ReadBlock(content, id)
	if err != nil {
		return nil, "", false, fmt.Errorf("%w in %q", err, content)
	}
	out := map[string]string{}
	for _, e := range entries {
		if old, dup := out[e.Name]; dup {
			return nil, "", false, fmt.Errorf("name %s twice (%s, %s) in %q", e.Name, old, e.IP, content)
		}
		out[e.Name] = e.IP
	}
	outside = string(content)
	if found {
		begin, end := hf.Markers(id)
		i := strings.Index(outside, begin+"\n")
		j := strings.Index(outside, end+"\n")
		outside = outside[:i] + outside[j+len(end)+1:]
	}
	return out, outside, found, nil
}

// waitHosts waits until the block in path maps exactly want.
func waitHosts(t *testing.T, path, id string, want map[string]string) {
	t.Helper()
	eventually(t, path+" to map "+fmt.Sprint(want), func() (bool, string) {
		got, _, err := hostsEntries(path, id)
		if err != nil {
			return false, err.Error()
		}
		return fmt.Sprint(got) == fmt.Sprint(want), fmt.Sprint(got)
	})
}
