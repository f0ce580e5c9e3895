// Package apps judges real applications by their own view of their cluster:
// the oracle of test/realnode's application tests and of bench/campaign.
// Views are read inside the application's containers with its own CLI
// (etcdctl); Judge is pure.
package apps

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/remotecommand"

	"github.com/flockd/flock/internal/testing/syncbuf"
)

// Exec runs cmd in a container and returns its stdout and stderr.
type Exec func(ctx context.Context, ns, pod, container string, cmd ...string) (string, error)

// NewExec returns an Exec through the apiserver and the kubelet, as kubectl
// exec does.
func NewExec(cfg *rest.Config, cs kubernetes.Interface) Exec {
	return func(ctx context.Context, ns, pod, container string, cmd ...string) (string, error) {
		req := cs.CoreV1().RESTClient().Post().Resource("pods").Namespace(ns).Name(pod).SubResource("exec").
			VersionedParams(&corev1.PodExecOptions{Container: container, Command: cmd, Stdout: true, Stderr: true}, scheme.ParameterCodec)
		ex, err := remotecommand.NewSPDYExecutor(cfg, http.MethodPost, req.URL())
		if err != nil {
			return "", err
		}
		return stream(ctx, ex)
	}
}

// stream runs ex and returns its stdout, then its stderr. When ctx ends
// first, client-go returns while its goroutines still copy the output: the
// buffers are read and written under a lock.
func stream(ctx context.Context, ex remotecommand.Executor) (string, error) {
	var out, errb syncbuf.Buffer
	err := ex.StreamWithContext(ctx, remotecommand.StreamOptions{Stdout: &out, Stderr: &errb})
	return out.String() + errb.String(), err
}

// EtcdView is one pod's etcd's view of its cluster.
type EtcdView struct {
	Pod string
	// ClusterID is 0 when the member did not answer.
	ClusterID uint64
	// Members are the member names; an unstarted member has the name "".
	Members []string
	Healthy bool
	// Err says why the view is incomplete.
	Err string
}

// EtcdContainer is the container etcdctl runs in.
const EtcdContainer = "etcd"

// ReadEtcd asks pod's own etcd (http://127.0.0.1:2379) for its member list
// and health, with etcdctl.
func ReadEtcd(ctx context.Context, ex Exec, ns, pod string) EtcdView {
	v := EtcdView{Pod: pod}
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	ctl := []string{"etcdctl", "--endpoints=http://127.0.0.1:2379", "--dial-timeout=2s", "--command-timeout=4s"}
	out, err := ex(ctx, ns, pod, EtcdContainer, append(ctl, "member", "list", "-w", "json")...)
	if err != nil {
		v.Err = fmt.Sprintf("member list: %v: %s", err, strings.TrimSpace(out))
		return v
	}
	if v.ClusterID, v.Members, err = parseMemberList([]byte(out)); err != nil {
		v.Err = fmt.Sprintf("member list: %v", err)
		return v
	}
	out, err = ex(ctx, ns, pod, EtcdContainer, append(ctl, "endpoint", "health")...)
	v.Healthy = err == nil && strings.Contains(out, "is healthy")
	if !v.Healthy {
		v.Err = fmt.Sprintf("endpoint health: %v: %s", err, strings.TrimSpace(out))
	}
	return v
}

// ReadEtcdAll reads every pod's view, in parallel.
func ReadEtcdAll(ctx context.Context, ex Exec, ns string, pods []string) []EtcdView {
	return eachPod(pods, func(p string) EtcdView { return ReadEtcd(ctx, ex, ns, p) })
}

// eachPod calls read for every pod at once and returns the results in the
// order of pods.
func eachPod[V any](pods []string, read func(pod string) V) []V {
	views := make([]V, len(pods))
	var wg sync.WaitGroup
	for i, p := range pods {
		wg.Go(func() { views[i] = read(p) })
	}
	wg.Wait()
	return views
}

// Verdict is what the views say about the cluster.
type Verdict struct {
	// Healthy: every pod answered, one cluster id, every member list equal
	// to the pods (all started), every member healthy.
	Healthy bool
	// ClusterIDs are the distinct cluster ids the members reported; more
	// than one is a split brain.
	ClusterIDs []uint64
	// Detail says what is wrong, in words.
	Detail string
}

// EtcdProgress scores how far views of a bootstrapping cluster got: per
// pod, one point each for having an address to ask, answering with a
// cluster id, and being healthy; plus the started members of the longest
// member list any of them reported. It rises as members start, join and
// become healthy, and stays flat while nothing does, whatever the machine's
// speed: the campaign calls a bootstrap stuck when it stays flat too long.
// It is pure.
func EtcdProgress(views []EtcdView) int {
	score, members := 0, 0
	for _, e := range views {
		if e.Err != errNoPodIP {
			score++
		}
		if e.ClusterID != 0 {
			score++
		}
		if e.Healthy {
			score++
		}
		started := 0
		for _, m := range e.Members {
			if m != "" {
				started++
			}
		}
		members = max(members, started)
	}
	return score + members
}

// errNoPodIP is the view of a pod that is not running with an address.
const errNoPodIP = "no running pod with an IP"

// Split reports more than one cluster id.
func (v Verdict) Split() bool { return len(v.ClusterIDs) > 1 }

// JudgeEtcd judges views of the StatefulSet's pods (names, the expected
// membership).
func JudgeEtcd(views []EtcdView, pods []string) Verdict {
	want := slices.Sorted(slices.Values(pods))
	var v Verdict
	var problems []string
	for _, e := range views {
		if e.ClusterID != 0 && !slices.Contains(v.ClusterIDs, e.ClusterID) {
			v.ClusterIDs = append(v.ClusterIDs, e.ClusterID)
		}
		switch {
		case e.ClusterID == 0 || !e.Healthy:
			problems = append(problems, fmt.Sprintf("%s: %s", e.Pod, e.Err))
		case !slices.Equal(e.Members, want):
			problems = append(problems, fmt.Sprintf("%s: members %q, want %q", e.Pod, e.Members, want))
		}
	}
	slices.Sort(v.ClusterIDs)
	if len(v.ClusterIDs) > 1 {
		problems = append(problems, fmt.Sprintf("%d cluster ids %x", len(v.ClusterIDs), v.ClusterIDs))
	}
	if len(views) != len(want) {
		problems = append(problems, fmt.Sprintf("%d views of %d pods", len(views), len(want)))
	}
	v.Healthy = len(problems) == 0
	v.Detail = strings.Join(problems, "; ")
	return v
}
