package apps

import (
	"context"
	"fmt"
	"net/http"
	"os/exec"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/flockd/flock/internal/testing/await"
	"github.com/flockd/flock/localcluster"
)

// TestReadEtcdHTTPAgreesWithEtcdctl reads one real etcd (the cluster's
// cached binary, on loopback) with both readers: healthy alone, with an unstarted
// learner (an unnamed member), and with an unstarted voter (no quorum).
func TestReadEtcdHTTPAgreesWithEtcdctl(t *testing.T) {
	root, err := localcluster.CacheRoot()
	if err != nil {
		t.Fatal(err)
	}
	bins, err := localcluster.Binaries(root)
	if err != nil {
		t.Fatal(err)
	}
	ports, err := localcluster.FreePorts(2)
	if err != nil {
		t.Fatal(err)
	}
	client, peer := strconv.Itoa(ports[0]), strconv.Itoa(ports[1])
	curl, purl := "http://127.0.0.1:"+client, "http://127.0.0.1:"+peer
	ctx, cancel := context.WithCancel(context.Background())
	etcd := exec.CommandContext(ctx, bins["etcd"], "--name=t", "--data-dir="+t.TempDir(),
		"--listen-client-urls="+curl, "--advertise-client-urls="+curl,
		"--listen-peer-urls="+purl, "--initial-advertise-peer-urls="+purl, "--initial-cluster=t="+purl)
	if err := etcd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); _ = etcd.Wait() })
	// ex runs etcdctl here, against the same etcd, as ReadEtcd runs it in a pod.
	ex := func(ctx context.Context, _, _, _ string, cmd ...string) (string, error) {
		args := slices.Clone(cmd[1:])
		for i, a := range args {
			if a == "--endpoints=http://127.0.0.1:2379" {
				args[i] = "--endpoints=" + curl
			}
		}
		out, err := exec.CommandContext(ctx, bins["etcdctl"], args...).CombinedOutput()
		return string(out), err
	}
	hc := &http.Client{}
	read := func() (byCtl, byHTTP EtcdView) {
		return ReadEtcd(context.Background(), ex, "ns", "t"), ReadEtcdHTTP(context.Background(), hc, "t", "127.0.0.1:"+client)
	}
	var ctl, web EtcdView
	await.Poll{Every: 200 * time.Millisecond}.Check(t, func() error {
		if ctl, web = read(); !ctl.Healthy || !web.Healthy {
			return fmt.Errorf("etcdctl %+v, http %+v", ctl, web)
		}
		return nil
	}, "a healthy single member")
	if !ctl.Healthy || !web.Healthy || ctl.ClusterID == 0 || ctl.ClusterID != web.ClusterID || !slices.Equal(ctl.Members, []string{"t"}) || !slices.Equal(web.Members, ctl.Members) {
		t.Fatalf("a healthy single member:\n etcdctl %+v\n http    %+v", ctl, web)
	}
	add := func(args ...string) {
		t.Helper()
		if out, err := ex(ctx, "", "", "", append([]string{"etcdctl", "--endpoints=http://127.0.0.1:2379", "member", "add"}, args...)...); err != nil {
			t.Fatalf("member add %q: %v: %s", args, err, out)
		}
	}
	// A learner does not count for the quorum: still healthy, and its
	// member has no name until it starts.
	add("l", "--learner", "--peer-urls=http://127.0.0.1:1")
	ctl, web = read()
	if !ctl.Healthy || !web.Healthy || ctl.ClusterID != web.ClusterID || !slices.Equal(ctl.Members, []string{"", "t"}) || !slices.Equal(web.Members, ctl.Members) {
		t.Fatalf("with an unstarted learner:\n etcdctl %+v\n http    %+v", ctl, web)
	}
	// A voter that never starts takes the quorum away: neither reader
	// gets a (linearizable) member list.
	add("u", "--peer-urls=http://127.0.0.1:2")
	ctl, web = read()
	if ctl.Healthy || web.Healthy || ctl.ClusterID != 0 || web.ClusterID != 0 || web.Err == "" {
		t.Fatalf("with an unstarted voter (no quorum):\n etcdctl %+v\n http    %+v", ctl, web)
	}
	cancel()
	_ = etcd.Wait()
	if v := ReadEtcdHTTP(context.Background(), hc, "t", "127.0.0.1:"+client); v.ClusterID != 0 || v.Healthy || v.Err == "" {
		t.Fatalf("a stopped etcd: %+v, want no cluster id and an error", v)
	}
}
