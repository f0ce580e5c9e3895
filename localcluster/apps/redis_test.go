package apps

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// Outputs of redis-cli info replication from Redis 7.0 (CRLF line ends).
const (
	primaryInfo = "# Replication\r\nrole:master\r\nconnected_slaves:2\r\n" +
		"slave0:ip=redis-2.redis.ns.svc.cluster.local,port=6379,state=online,offset=1234,lag=0\r\n" +
		"slave1:ip=redis-1.redis.ns.svc.cluster.local,port=6379,state=online,offset=1234,lag=1\r\n" +
		"master_failover_state:no-failover\r\nmaster_replid:be5d8696650eb45869e948ed2daf457c545c82b4\r\n" +
		"master_replid2:0000000000000000000000000000000000000000\r\nmaster_repl_offset:1234\r\n"
	replicaInfo = "# Replication\r\nrole:slave\r\nmaster_host:redis-0.redis.ns.svc.cluster.local\r\nmaster_port:6379\r\n" +
		"master_link_status:up\r\nmaster_last_io_seconds_ago:1\r\nslave_repl_offset:1234\r\nconnected_slaves:0\r\n" +
		"master_replid:be5d8696650eb45869e948ed2daf457c545c82b4\r\nmaster_repl_offset:1234\r\n"
)

func TestParseRedisInfo(t *testing.T) {
	p := ParseRedisInfo("redis-0", primaryInfo)
	if p.Role != "master" || !slices.Equal(p.Replicas, []string{"redis-1", "redis-2"}) || p.ReplID != "be5d8696650eb45869e948ed2daf457c545c82b4" || p.Err != "" {
		t.Errorf("primary: %+v", p)
	}
	r := ParseRedisInfo("redis-1", replicaInfo)
	if r.Role != "slave" || r.Master != "redis-0" || !r.LinkUp || r.ReplID != p.ReplID || len(r.Replicas) != 0 || r.Err != "" {
		t.Errorf("replica: %+v", r)
	}
	down := ParseRedisInfo("redis-1", strings.Replace(replicaInfo, "master_link_status:up", "master_link_status:down", 1))
	if down.LinkUp {
		t.Errorf("link down read as up: %+v", down)
	}
	if v := ParseRedisInfo("redis-1", "LOADING Redis is loading the dataset in memory\n"); v.Role != "" || v.Err == "" {
		t.Errorf("loading: %+v, want no role and an error", v)
	}
	if v := ParseRedisInfo("redis-0", strings.Replace(primaryInfo, "connected_slaves:2", "connected_slaves:3", 1)); v.Err == "" {
		t.Errorf("connected_slaves disagreeing with the list: no error: %+v", v)
	}
}

func TestJudgeRedis(t *testing.T) {
	pods := []string{"redis-0", "redis-1", "redis-2"}
	primary := func(pod, id string, replicas ...string) RedisView {
		return RedisView{Pod: pod, Role: "master", Replicas: replicas, ReplID: id}
	}
	replica := func(pod, of, id string) RedisView {
		return RedisView{Pod: pod, Role: "slave", Master: of, LinkUp: true, ReplID: id}
	}
	for _, tc := range []struct {
		name           string
		views          []RedisView
		healthy, split bool
		primary        string
		detail         string
	}{
		{"one primary", []RedisView{primary("redis-0", "a", "redis-1", "redis-2"), replica("redis-1", "redis-0", "a"), replica("redis-2", "redis-0", "a")}, true, false, "redis-0", ""},
		{"promoted replica", []RedisView{replica("redis-0", "redis-1", "b"), primary("redis-1", "b", "redis-0", "redis-2"), replica("redis-2", "redis-1", "b")}, true, false, "redis-1", ""},
		{"two primaries", []RedisView{primary("redis-0", "a", "redis-1"), replica("redis-1", "redis-0", "a"), primary("redis-2", "c")}, false, true, "", "2 primaries"},
		{"no primary", []RedisView{replica("redis-0", "redis-1", "a"), replica("redis-1", "redis-0", "a"), replica("redis-2", "redis-0", "a")}, false, false, "", "no primary"},
		{"a replica missing at the primary", []RedisView{primary("redis-0", "a", "redis-1"), replica("redis-1", "redis-0", "a"), replica("redis-2", "redis-0", "a")}, false, false, "redis-0", "want"},
		{"an extra replica", []RedisView{primary("redis-0", "a", "redis-1", "redis-2", "redis-3"), replica("redis-1", "redis-0", "a"), replica("redis-2", "redis-0", "a")}, false, false, "redis-0", "redis-3"},
		{"a replica of another", []RedisView{primary("redis-0", "a", "redis-1", "redis-2"), replica("redis-1", "redis-0", "a"), replica("redis-2", "redis-1", "a")}, false, false, "redis-0", "not of the primary"},
		{"link down", []RedisView{primary("redis-0", "a", "redis-1", "redis-2"), replica("redis-1", "redis-0", "a"), {Pod: "redis-2", Role: "slave", Master: "redis-0", ReplID: "a"}}, false, false, "redis-0", "link to redis-0 down"},
		{"another replication id", []RedisView{primary("redis-0", "a", "redis-1", "redis-2"), replica("redis-1", "redis-0", "a"), replica("redis-2", "redis-0", "z")}, false, false, "redis-0", "replication id"},
		{"no answer", []RedisView{primary("redis-0", "a", "redis-1", "redis-2"), replica("redis-1", "redis-0", "a"), {Pod: "redis-2", Err: "connection refused"}}, false, false, "redis-0", "connection refused"},
		{"a view missing", []RedisView{primary("redis-0", "a", "redis-1"), replica("redis-1", "redis-0", "a")}, false, false, "redis-0", "no view of redis-2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := JudgeRedis(tc.views, pods)
			if v.Healthy != tc.healthy || v.Split() != tc.split || v.Primary() != tc.primary || !strings.Contains(v.Detail, tc.detail) {
				t.Errorf("JudgeRedis = healthy %v split %v primary %q %q, want healthy %v split %v primary %q and %q",
					v.Healthy, v.Split(), v.Primary(), v.Detail, tc.healthy, tc.split, tc.primary, tc.detail)
			}
		})
	}
}

// fakeRedisCli answers "redis-cli -e -h HOST info replication" from
// $STATE/HOST.info (or, once each, $STATE/HOST.info.first: the answer before
// a change), logs every call to $STATE/calls and answers OK to the rest.
const fakeRedisCli = `echo "$*" >> "$STATE/calls"
[ "$1" = -e ] && shift
[ "$1" = -h ] && { host=$2; shift 2; }
if [ "$1" = info ]; then
  if [ -f "$STATE/$host.info.first" ]; then cat "$STATE/$host.info.first"; rm "$STATE/$host.info.first"; exit 0; fi
  [ -f "$STATE/$host.info" ] || { echo "Could not connect to Redis at $host:6379" >&2; exit 1; }
  cat "$STATE/$host.info"
  exit 0
fi
echo OK
`

// TestRedisOnChangeNeverFollowsItself: the sidecar's hook reads this
// member as a replica of redis-0, which follows redis-1, this member:
// another member promoted it between the hook's two reads (redis-10's
// round 28: redis-0's replacement promoted redis-1, whose hook then made
// it a replica of itself, and the set had no primary). The hook must
// leave a member that is the primary alone.
func TestRedisOnChangeNeverFollowsItself(t *testing.T) {
	g := newExampleScripts(t, "redis", "/run/redis", "/data")
	state := filepath.Join(g.dir, "state")
	if err := os.Mkdir(state, 0o755); err != nil {
		t.Fatal(err)
	}
	g.stub("redis-cli", fakeRedisCli)
	const ns = ".redis.ns.svc.cluster.local"
	g.write(filepath.Join(g.run, "self"), "redis-1"+ns+"\n")
	for name, info := range map[string]string{
		"127.0.0.1.info.first":   "role:slave\nmaster_host:redis-0" + ns + "\nmaster_link_status:down\n",
		"127.0.0.1.info":         "role:master\nconnected_slaves:2\n",
		"redis-0" + ns + ".info": "role:slave\nmaster_host:redis-1" + ns + "\nmaster_link_status:up\n",
		"redis-1" + ns + ".info": "role:master\nconnected_slaves:2\n",
		"redis-2" + ns + ".info": "role:slave\nmaster_host:redis-1" + ns + "\nmaster_link_status:up\n",
	} {
		g.write(filepath.Join(state, name), info)
	}
	cmd := g.command("on-change.sh", "STATE="+state)
	cmd.Stdin = strings.NewReader("redis-0" + ns + " 10.0.0.1\nredis-1" + ns + " 10.0.0.2\nredis-2" + ns + " 10.0.0.3\n")
	out, err := cmd.CombinedOutput()
	calls, _ := os.ReadFile(filepath.Join(state, "calls"))
	if err != nil {
		t.Fatalf("on-change.sh: %v\n%s\ncalls:\n%s", err, out, calls)
	}
	for line := range strings.Lines(string(calls)) {
		if strings.Contains(line, "-h 127.0.0.1 replicaof") {
			t.Errorf("the hook changed this member, the primary: %q\noutput:\n%s\ncalls:\n%s", line, out, calls)
		}
	}
}
