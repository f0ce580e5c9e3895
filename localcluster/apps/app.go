package apps

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"
)

// App is the oracle of one application of the campaign (bench/campaign
// -app): it judges the application's cluster by the application's own view
// of it. The campaign creates examples/apps/<name> (the name the App is
// registered under in Apps) and faults and judges its StatefulSet's pods:
// the example has one StatefulSet, with at least one init container (the
// campaign's start skew, a shell's sleep, runs before them in the last
// one's image) and one claim template named data (the wipe deletes
// data-<set>-0); upstream's subject also needs an init container "install"
// copying peer-finder to /flock and the scripts at /scripts/on-start.sh and
// on-change.sh, which get no bootstrap role from upstream's binary.
//
// Observe reads every pod of pods (the StatefulSet's, by ordinal) in ns and
// judges them together; it never fails: what could not be read is in the
// Observation's Detail. With confirm the poll before looked healthy:
// Observe reads again as the application's tests judge (a more expensive
// read, e.g. the application's CLI in every pod). With mark != "" (what
// Mark returned) a member without the mark is not healthy, and a member
// with another one is a second cluster.
//
// Mark writes a mark through the cluster once, right after it first became
// healthy and before any fault that follows (the wipe of member 0's data),
// and returns what Observe must then find on every member ("" for an
// application the campaign does not mark). An error means the mark was not
// written, or not acknowledged by every member (the campaign tries again).
type App interface {
	Observe(ctx context.Context, r Reader, ns string, pods []string, confirm bool, mark string) Observation
	Mark(ctx context.Context, r Reader, ns string, pods []string) (string, error)
}

// Apps are the campaign's applications by name (-app): each runs
// examples/apps/<name>. A new application registers here.
var Apps = map[string]App{
	"etcd":      EtcdApp{},
	"zookeeper": ZookeeperApp{},
	"redis":     RedisApp{},
	"galera":    GaleraApp{},
}

// Reader is how an App reaches the pods of one poll.
type Reader struct {
	// Exec runs a command in a pod's container.
	Exec Exec
	// IPs are the running pods' addresses by name; a pod without one is
	// not running (or not yet).
	IPs map[string]string
	// HTTP is the client for requests to the pods' addresses.
	HTTP *http.Client
	// Containers are the running containers' ids by pod and container
	// name (ContainerIDs), for reading a container from this machine
	// (ContainerRoot); nil when the pods are not on this machine's real
	// nodes.
	Containers map[string]map[string]string
}

// Observation is what one poll says about an application's cluster.
type Observation struct {
	// Healthy: the application's oracle is satisfied (e.g. for etcd: one
	// cluster id, members equal to the pods, all healthy).
	Healthy bool
	// Progress scores how far a bootstrap got: it rises as members start,
	// join and agree, and stays flat while nothing does, whatever the
	// machine's speed (the campaign's stall rule).
	Progress int
	// Identities name the clusters the members belong to (etcd's cluster
	// ids, the marks read): the campaign calls a round a split brain when
	// it saw more than one over the whole round.
	Identities []string
	// Split says why the views themselves show two clusters at once (two
	// primaries, two leaders of different configurations); "" when not.
	Split string
	// Detail says what is wrong, in words.
	Detail string
}

// EtcdApp is etcd's oracle: one cluster id, members equal to the pods, all
// healthy; polled over etcd's client API, confirmed with etcdctl in every
// pod. It does not mark: a second cluster has another cluster id.
type EtcdApp struct{}

// Observe reads etcd's views (see App).
func (EtcdApp) Observe(ctx context.Context, r Reader, ns string, pods []string, confirm bool, _ string) Observation {
	var views []EtcdView
	if confirm {
		views = ReadEtcdAll(ctx, r.Exec, ns, pods)
	} else {
		views = eachAddr(r, pods, "2379", func(pod string) EtcdView { return EtcdView{Pod: pod, Err: errNoPodIP} }, func(pod, addr string) EtcdView {
			return ReadEtcdHTTP(ctx, r.HTTP, pod, addr)
		})
	}
	v := JudgeEtcd(views, pods)
	o := Observation{Healthy: v.Healthy, Progress: EtcdProgress(views), Detail: v.Detail}
	for _, id := range v.ClusterIDs {
		o.Identities = append(o.Identities, fmt.Sprintf("cluster id %x", id))
	}
	return o
}

// Mark writes nothing: etcd's cluster id names its cluster.
func (EtcdApp) Mark(context.Context, Reader, string, []string) (string, error) { return "", nil }

// ZookeeperApp is ZooKeeper's oracle: one leader, the others followers, one
// committed configuration whose participants are the pods (srvr and conf
// in each pod), and the marker znode written once healthy on every member
// afterwards (zkCli.sh in each pod).
type ZookeeperApp struct{}

// Observe reads ZooKeeper's views (see App); with confirm and a mark, the
// marker znode on every member.
func (ZookeeperApp) Observe(ctx context.Context, r Reader, ns string, pods []string, confirm bool, mark string) Observation {
	path := ""
	if confirm && mark != "" {
		path = ZookeeperMarker
	}
	var views []ZookeeperView
	if confirm {
		views = ReadZookeeperAll(ctx, r.Exec, ns, pods, ZookeeperContainer, path)
	} else {
		views = eachAddr(r, pods, "2181", func(pod string) ZookeeperView { return ZookeeperView{Pod: pod, Err: errNoPodIP} }, func(pod, addr string) ZookeeperView {
			return ReadZookeeperTCP(ctx, pod, addr)
		})
	}
	v := JudgeZookeeper(views, pods, path != "")
	o := Observation{Healthy: v.Healthy, Progress: ZookeeperProgress(views), Detail: v.Detail, Split: ZookeeperSplit(views)}
	o.Identities = append(o.Identities, v.Markers...)
	if o.Healthy && path != "" && !slices.Equal(v.Markers, []string{mark}) {
		o.Healthy = false
		o.Identities = append(o.Identities, mark)
		o.Detail = fmt.Sprintf("markers %q, want %q", v.Markers, mark)
	}
	return o
}

// ZookeeperMarker is the znode the campaign marks an ensemble with.
const ZookeeperMarker = "/flock-campaign"

// Mark creates the marker znode through the leader.
func (ZookeeperApp) Mark(ctx context.Context, r Reader, ns string, pods []string) (string, error) {
	views := ReadZookeeperAll(ctx, r.Exec, ns, pods, ZookeeperContainer, "")
	v := JudgeZookeeper(views, pods, false)
	if len(v.Leaders) != 1 {
		return "", fmt.Errorf("mark: leaders %q", v.Leaders)
	}
	mark := MarkerPrefix + ns
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	out, err := r.Exec(ctx, ns, v.Leaders[0], ZookeeperContainer, "sh", "-c", `timeout 50 zkCli.sh -server 127.0.0.1:2181 create "$1" "$2" 2>&1`, "sh", ZookeeperMarker, mark)
	switch {
	case strings.Contains(out, "Node already exists: "+ZookeeperMarker):
		// An earlier try of this mark created it and failed after (zkCli.sh
		// exits 1 on an existing node); Observe checks its data on every
		// member.
	case err != nil:
		return "", fmt.Errorf("mark: create %s through %s: %w: %s", ZookeeperMarker, v.Leaders[0], err, lastLines(out, 3))
	case !strings.Contains(out, "Created "+ZookeeperMarker):
		return "", fmt.Errorf("mark: create %s through %s: %s", ZookeeperMarker, v.Leaders[0], lastLines(out, 3))
	}
	return mark, nil
}

// RedisApp is Redis's oracle: one primary whose connected replicas are
// exactly the other pods, each following it with its link up and the
// primary's replication id (info replication in each pod), and a key
// written through the primary once healthy present on every member
// afterwards (redis-cli get in each pod).
type RedisApp struct{}

// RedisMarkKey is the key the campaign writes through the primary.
const RedisMarkKey = "flock-campaign"

// Observe reads Redis's views (see App); with confirm and a mark, the key
// on every member.
func (RedisApp) Observe(ctx context.Context, r Reader, ns string, pods []string, confirm bool, mark string) Observation {
	var views []RedisView
	if confirm {
		views = ReadRedisAll(ctx, r.Exec, ns, pods)
	} else {
		views = eachAddr(r, pods, "6379", func(pod string) RedisView { return RedisView{Pod: pod, Err: errNoPodIP} }, func(pod, addr string) RedisView {
			return ReadRedisTCP(ctx, pod, addr)
		})
	}
	v := JudgeRedis(views, pods)
	o := Observation{Healthy: v.Healthy, Progress: RedisProgress(views), Detail: v.Detail}
	if v.Split() {
		o.Split = fmt.Sprintf("primaries %q at once", v.Primaries)
	}
	if !confirm || mark == "" || !o.Healthy {
		return o
	}
	values := eachPod(pods, func(pod string) string {
		ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		defer cancel()
		out, err := r.Exec(ctx, ns, pod, RedisContainer, "redis-cli", "-e", "get", RedisMarkKey)
		if err != nil {
			return ""
		}
		return strings.TrimSpace(out)
	})
	var problems []string
	for i, got := range values {
		if got != "" && !slices.Contains(o.Identities, got) {
			o.Identities = append(o.Identities, got)
		}
		if got != mark {
			problems = append(problems, fmt.Sprintf("%s: %s = %q, want %q", pods[i], RedisMarkKey, got, mark))
		}
	}
	if len(problems) > 0 {
		o.Healthy, o.Detail = false, strings.Join(problems, "; ")
	}
	return o
}

// Mark sets the key through the primary and waits until every replica
// acknowledged it (WAIT), so that losing one member's data cannot lose it.
func (RedisApp) Mark(ctx context.Context, r Reader, ns string, pods []string) (string, error) {
	v := JudgeRedis(ReadRedisAll(ctx, r.Exec, ns, pods), pods)
	primary := v.Primary()
	if primary == "" {
		return "", fmt.Errorf("mark: primaries %q", v.Primaries)
	}
	ctx, cancel := context.WithTimeout(ctx, 40*time.Second)
	defer cancel()
	mark := ns
	if out, err := r.Exec(ctx, ns, primary, RedisContainer, "redis-cli", "-e", "set", RedisMarkKey, mark); err != nil {
		return "", fmt.Errorf("mark: set through %s: %w: %s", primary, err, strings.TrimSpace(out))
	}
	want := fmt.Sprint(len(pods) - 1)
	out, err := r.Exec(ctx, ns, primary, RedisContainer, "redis-cli", "-e", "wait", want, "20000")
	switch {
	case err != nil:
		return "", fmt.Errorf("mark: wait %s on %s: %w: %s", want, primary, err, strings.TrimSpace(out))
	case strings.TrimSpace(out) != want:
		return "", fmt.Errorf("mark: wait %s on %s: %s replicas acknowledged", want, primary, strings.TrimSpace(out))
	}
	return mark, nil
}

// lastLines is the last n lines of s, for errors.
func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
