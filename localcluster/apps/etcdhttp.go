package apps

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
)

// ReadEtcdHTTP asks the etcd serving clients at addr (host:port, e.g. a
// pod's IP and 2379) for the same member list and health as ReadEtcd, over
// etcd's own client API (the JSON gateway of the calls etcdctl makes: member
// list, linearizable as etcdctl asks for it, and /health, a quorum read) instead of etcdctl in an exec. It costs a
// request where ReadEtcd costs two execs (apiserver, kubelet, runc and an
// etcdctl process each): the campaign polls with it and confirms with
// ReadEtcd.
func ReadEtcdHTTP(ctx context.Context, hc *http.Client, pod, addr string) EtcdView {
	v := EtcdView{Pod: pod}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	base := "http://" + addr
	body, err := call(ctx, hc, http.MethodPost, base+"/v3/cluster/member/list", `{"linearizable":true}`)
	if err != nil {
		v.Err = "member list: " + err.Error()
		return v
	}
	if v.ClusterID, v.Members, err = parseMemberList(body); err != nil {
		v.Err = "member list: " + err.Error()
		return v
	}
	body, err = call(ctx, hc, http.MethodGet, base+"/health", "")
	var h struct{ Health, Reason string }
	if err == nil {
		err = json.Unmarshal(body, &h)
	}
	v.Healthy = err == nil && h.Health == "true"
	if !v.Healthy {
		v.Err = fmt.Sprintf("health: %v %s", err, h.Reason)
	}
	return v
}

func call(ctx context.Context, hc *http.Client, method, url, body string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, method, url, strings.NewReader(body))
	if err != nil {
		return nil, err
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return nil, err
	}
	// /health answers 503 with its JSON when the member has no quorum.
	if resp.StatusCode != http.StatusOK && !(resp.StatusCode == http.StatusServiceUnavailable && bytes.HasPrefix(b, []byte("{"))) {
		return nil, fmt.Errorf("%s: %s", resp.Status, bytes.TrimSpace(b))
	}
	return b, nil
}

// parseMemberList reads a member list in JSON, etcdctl's (-w json) or the
// gateway's: the cluster id (a uint64, which the gateway writes as a string
// and etcdctl as a number) and the sorted member names ("" for a member
// added but not started).
func parseMemberList(b []byte) (uint64, []string, error) {
	var ml struct {
		Header struct {
			ClusterID json.RawMessage `json:"cluster_id"`
		} `json:"header"`
		Members []struct{ Name string } `json:"members"`
	}
	if err := json.Unmarshal(b, &ml); err != nil {
		return 0, nil, err
	}
	id, err := strconv.ParseUint(strings.Trim(string(ml.Header.ClusterID), `"`), 10, 64)
	if err != nil || id == 0 {
		return 0, nil, fmt.Errorf("no cluster id in %s", bytes.TrimSpace(b))
	}
	names := make([]string, 0, len(ml.Members))
	for _, m := range ml.Members {
		names = append(names, m.Name)
	}
	slices.Sort(names)
	return id, names, nil
}
