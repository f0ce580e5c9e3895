package apps

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// zkOut is what ReadZookeeper's command prints for a server in mode with
// the participants (ordinals) of a configuration of version.
func zkOut(mode, version string, ordinals ...int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Zookeeper version: 3.8.0-${mvngit.commit.id}, built on 2024-12-29 17:54 UTC\nLatency min/avg/max: 0/0.0/0\nZxid: 0x200000003\n")
	if mode != "" {
		fmt.Fprintf(&b, "Mode: %s\nNode count: 6\n", mode)
	} else {
		b.WriteString("This ZooKeeper instance is not currently serving requests\n")
	}
	b.WriteString("---\nclientPort=2181\ndataDir=/data/version-2\nserverId=1\nmembership: \n")
	for _, o := range ordinals {
		fmt.Fprintf(&b, "server.%d=zk-%d.zk.ns.svc.cluster.local:2888:3888:participant;0.0.0.0:2181\n", o+1, o)
	}
	fmt.Fprintf(&b, "version=%s", version)
	return b.String()
}

func TestParseZookeeper(t *testing.T) {
	v := ParseZookeeper("zk-1", zkOut("follower", "200000003", 2, 0, 1))
	want := []string{
		"server.1=zk-0.zk.ns.svc.cluster.local:2888:3888:participant;0.0.0.0:2181",
		"server.2=zk-1.zk.ns.svc.cluster.local:2888:3888:participant;0.0.0.0:2181",
		"server.3=zk-2.zk.ns.svc.cluster.local:2888:3888:participant;0.0.0.0:2181",
	}
	if v.Mode != "follower" || v.Version != "200000003" || !slices.Equal(v.Servers, want) || v.Err != "" {
		t.Errorf("got %+v", v)
	}
	if v := ParseZookeeper("zk-1", zkOut("", "0")); v.Mode != "" || !strings.Contains(v.Err, "not currently serving") {
		t.Errorf("not serving: got %+v", v)
	}
}

func TestJudgeZookeeper(t *testing.T) {
	pods := []string{"zk-0", "zk-1", "zk-2"}
	view := func(pod, mode, version, marker string, ordinals ...int) ZookeeperView {
		v := ParseZookeeper(pod, zkOut(mode, version, ordinals...))
		v.Marker = marker
		return v
	}
	healthy := []ZookeeperView{
		view("zk-0", "follower", "300000002", "m1", 0, 1, 2),
		view("zk-1", "leader", "300000002", "m1", 0, 1, 2),
		view("zk-2", "follower", "300000002", "m1", 0, 1, 2),
	}
	for _, tc := range []struct {
		name    string
		views   []ZookeeperView
		pods    []string
		marker  bool
		healthy bool
		split   bool
		detail  string
	}{
		{"healthy", healthy, pods, true, true, false, ""},
		{"healthy without markers", healthy, pods, false, true, false, ""},
		{"one not serving", []ZookeeperView{healthy[0], healthy[1], view("zk-2", "", "0", "")}, pods, true, false, false, `zk-2: mode ""`},
		{"two leaders", []ZookeeperView{view("zk-0", "leader", "100000000", "m2", 0), healthy[1], healthy[2]}, pods, true, false, true, "leaders"},
		{"two markers", []ZookeeperView{healthy[0], healthy[1], view("zk-2", "follower", "300000002", "m2", 0, 1, 2)}, pods, true, false, true, "markers"},
		{"configs differ", []ZookeeperView{view("zk-0", "follower", "200000001", "m1", 0, 1), healthy[1], healthy[2]}, pods, true, false, false, "2 configurations"},
		{"participants are not the pods", healthy, []string{"zk-0", "zk-1", "zk-2", "zk-3"}, true, false, false, "participants"},
		{"an observer", []ZookeeperView{healthy[0], healthy[1], view("zk-2", "observer", "300000002", "m1", 0, 1, 2)}, pods, true, false, false, "observer"},
		{"marker missing", []ZookeeperView{healthy[0], healthy[1], view("zk-2", "follower", "300000002", "", 0, 1, 2)}, pods, true, false, false, "no marker"},
	} {
		v := JudgeZookeeper(tc.views, tc.pods, tc.marker)
		if v.Healthy != tc.healthy || v.Split() != tc.split || !strings.Contains(v.Detail, tc.detail) {
			t.Errorf("%s: healthy %v split %v detail %q; want %v %v containing %q", tc.name, v.Healthy, v.Split(), v.Detail, tc.healthy, tc.split, tc.detail)
		}
	}
}

// TestZookeeperConfigAsksSrvrFirst runs examples/apps/zookeeper's config
// helper: it starts zkCli.sh (a JVM) only once srvr says a server of the
// list is in a quorum, and fails without it when none is; a joiner waiting
// for the ensemble calls it every 2 s.
func TestZookeeperConfigAsksSrvrFirst(t *testing.T) {
	g := newExampleScripts(t, "zookeeper", "/run/zk", "/data")
	calls := filepath.Join(g.dir, "zkcli-calls")
	g.stub("hostname", "echo zk-1")
	g.stub("nc", `cat >/dev/null
case "$3" in
zk-0.zk) echo "Mode: leader" ;;
zk-3.zk) echo "Mode: observer" ;;
zk-4.zk) exit 1 ;;
*) echo "This ZooKeeper instance is not currently serving requests" ;;
esac`)
	g.stub("zkCli.sh", fmt.Sprintf(`echo "$*" >> %s
echo "server.1=zk-0.zk:2888:3888:participant;0.0.0.0:2181"`, calls))
	for _, c := range []struct {
		servers string
		ok      bool
	}{
		{servers: "zk-1.zk:2181,zk-2.zk:2181,zk-4.zk:2181"},
		{servers: ""},
		{servers: "zk-2.zk:2181,zk-0.zk:2181", ok: true},
		{servers: "zk-3.zk:2181", ok: true},
	} {
		os.Remove(calls)
		cmd := g.command("lib.sh")
		cmd.Args = []string{"sh", "-c", `. "$0"; config "$1"`, filepath.Join(g.dir, "lib.sh"), c.servers}
		out, err := cmd.Output()
		b, _ := os.ReadFile(calls)
		if !c.ok {
			if err == nil || len(b) != 0 {
				t.Errorf("%q, no server in a quorum: config %q (%v), zkCli.sh ran %q; want a failure without zkCli.sh", c.servers, out, err, b)
			}
			continue
		}
		if err != nil || !strings.HasPrefix(string(out), "server.1=zk-0.zk:") || string(b) != "-timeout 5000 -server "+c.servers+" config\n" {
			t.Errorf("%q: config %q (%v), zkCli.sh ran %q; want zkCli.sh's server lines through the list", c.servers, out, err, b)
		}
	}
}

// TestZookeeperAppMark: the marker znode is created through the leader; a
// node already there (an earlier try created it, then failed) is the mark,
// though zkCli.sh exits 1 for it; any other failure is an error.
func TestZookeeperAppMark(t *testing.T) {
	pods := []string{"zk-0", "zk-1", "zk-2"}
	for _, c := range []struct {
		name, out string
		exit, ok  bool
	}{
		{name: "created", out: "WatchedEvent state:SyncConnected type:None path:null\nCreated /flock-campaign\n", ok: true},
		{name: "already there", out: "WatchedEvent state:SyncConnected type:None path:null\nNode already exists: /flock-campaign\n", exit: true, ok: true},
		{name: "lost", out: "KeeperErrorCode = ConnectionLoss for /flock-campaign\n", exit: true},
		{name: "no answer", out: "WatchedEvent state:SyncConnected type:None path:null\n"},
	} {
		var created []string
		ex := func(_ context.Context, _, pod, _ string, cmd ...string) (string, error) {
			if strings.Contains(cmd[2], "srvr") {
				mode := map[string]string{"zk-0": "follower", "zk-1": "leader", "zk-2": "follower"}[pod]
				return zkOut(mode, "100000003", 0, 1, 2), nil
			}
			created = append(created, pod+": "+strings.Join(cmd[4:], " "))
			if c.exit {
				return c.out, errors.New("command terminated with exit code 1")
			}
			return c.out, nil
		}
		mark, err := ZookeeperApp{}.Mark(context.Background(), Reader{Exec: ex}, "campaign-flock-1-x", pods)
		if want := []string{"zk-1: /flock-campaign marker=campaign-flock-1-x"}; !slices.Equal(created, want) {
			t.Errorf("%s: created %q, want %q (through the leader)", c.name, created, want)
		}
		switch {
		case c.ok && (err != nil || mark != "marker=campaign-flock-1-x"):
			t.Errorf("%s: mark %q, %v; want marker=campaign-flock-1-x", c.name, mark, err)
		case !c.ok && err == nil:
			t.Errorf("%s: mark %q, want an error", c.name, mark)
		}
	}
}
