package clustertest

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

// EtcdURL is the client URL of the cluster's etcd, from kube-apiserver's
// --etcd-servers argument.
func (c *Cluster) EtcdURL(t testing.TB) string {
	t.Helper()
	for _, p := range c.state.Procs {
		if p.Name != "kube-apiserver" {
			continue
		}
		for _, a := range p.Args {
			if v, ok := strings.CutPrefix(a, "--etcd-servers="); ok {
				return strings.Split(v, ",")[0]
			}
		}
	}
	t.Fatal("no kube-apiserver --etcd-servers argument in the cluster state")
	return ""
}

// CompactEtcd compacts the cluster's etcd at its current revision, through
// etcd's HTTP/JSON gateway, and returns that revision. A watch or list
// from an older resource version then gets 410 Gone. Only for clusters
// from Private: the shared one serves other tests.
func (c *Cluster) CompactEtcd(t testing.TB) int64 {
	t.Helper()
	if !c.private {
		t.Fatal("CompactEtcd needs a cluster from cluster.Private(t); the shared one serves other tests")
	}
	url := c.EtcdURL(t)
	var rng struct {
		Header struct {
			Revision string `json:"revision"`
		} `json:"header"`
	}
	etcdPost(t, url+"/v3/kv/range", map[string]any{"key": "AA==", "limit": 1}, &rng) // key "\x00": any key gives the header
	rev, err := strconv.ParseInt(rng.Header.Revision, 10, 64)
	if err != nil {
		t.Fatalf("etcd range: revision %q: %v", rng.Header.Revision, err)
	}
	etcdPost(t, url+"/v3/kv/compaction", map[string]any{"revision": rev, "physical": true}, nil)
	return rev
}

func etcdPost(t testing.TB, url string, req, resp any) {
	t.Helper()
	body, err := json.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	res, err := http.DefaultClient.Do(r)
	if err != nil {
		t.Fatalf("POST %s: %v", url, err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	if res.StatusCode != http.StatusOK {
		t.Fatalf("POST %s: %s: %s", url, res.Status, b)
	}
	if resp != nil {
		if err := json.Unmarshal(b, resp); err != nil {
			t.Fatalf("POST %s: %v: %s", url, err, b)
		}
	}
}
