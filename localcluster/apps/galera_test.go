package apps

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// galeraOut is mariadb -NB's answer to galeraStatus from MariaDB 10.11.
const galeraOut = "wsrep_last_committed\t10\nwsrep_local_state_comment\tSynced\nwsrep_cluster_size\t3\n" +
	"wsrep_cluster_state_uuid\t3626f7af-f035-11f1-b1fb-1f26f40b00d3\nwsrep_cluster_status\tPrimary\n"

func TestParseGaleraStatus(t *testing.T) {
	v := ParseGaleraStatus("galera-0", galeraOut)
	if v.UUID != "3626f7af-f035-11f1-b1fb-1f26f40b00d3" || v.Size != 3 || v.State != "Synced" || v.Status != "Primary" || v.LastCommitted != 10 || v.Err != "" {
		t.Errorf("%+v", v)
	}
	if v := ParseGaleraStatus("galera-0", "ERROR 2002 (HY000): Can't connect to local server through socket\n"); v.Err == "" {
		t.Errorf("no status: %+v, want an error", v)
	}
}

func TestJudgeGalera(t *testing.T) {
	pods := []string{"galera-0", "galera-1", "galera-2"}
	view := func(pod, out string) GaleraView { return ParseGaleraStatus(pod, out) }
	healthy := []GaleraView{view("galera-0", galeraOut), view("galera-1", galeraOut), view("galera-2", galeraOut)}
	if v := JudgeGalera(healthy, pods); !v.Healthy || v.Split() || v.UUID() != "3626f7af-f035-11f1-b1fb-1f26f40b00d3" {
		t.Errorf("healthy: %+v", v)
	}
	other := strings.Replace(strings.Replace(galeraOut, "3626f7af", "99999999", 1), "size\t3", "size\t1", 1)
	split := []GaleraView{view("galera-0", galeraOut), view("galera-1", strings.Replace(galeraOut, "size\t3", "size\t2", 1)), view("galera-2", other)}
	if v := JudgeGalera(split, pods); v.Healthy || !v.Split() {
		t.Errorf("two clusters: %+v, want a split", v)
	}
	// One history, two clusters: galera-0, restarted with its data while
	// galera-1 and galera-2 ran on, bootstrapped a component of its own
	// (upstream's galera-18, round 29): the same state uuid, each
	// component Primary, no member in common.
	forked := []GaleraView{
		view("galera-0", strings.Replace(galeraOut, "size\t3", "size\t1", 1)+"wsrep_incoming_addresses\t10.245.1.121:3306\n"),
		view("galera-1", strings.Replace(galeraOut, "size\t3", "size\t2", 1)+"wsrep_incoming_addresses\t10.245.2.114:3306,10.245.0.86:3306\n"),
		view("galera-2", strings.Replace(galeraOut, "size\t3", "size\t2", 1)+"wsrep_incoming_addresses\t10.245.0.86:3306,10.245.2.114:3306\n"),
	}
	if v := JudgeGalera(forked, pods); v.Healthy || !v.Split() || !strings.Contains(v.Detail, "galera-0 and galera-1 in primary components with no member in common") {
		t.Errorf("one uuid, two primary components: %+v, want a split", v)
	}
	// A view change seen half-way (galera-2 already in the new component,
	// galera-0 not yet) shares members: no split.
	changing := []GaleraView{
		view("galera-0", galeraOut+"wsrep_incoming_addresses\t10.245.1.121:3306,10.245.2.114:3306,10.245.0.86:3306\n"),
		view("galera-1", galeraOut+"wsrep_incoming_addresses\t10.245.1.121:3306,10.245.2.114:3306,10.245.0.86:3306\n"),
		view("galera-2", strings.Replace(galeraOut, "size\t3", "size\t2", 1)+"wsrep_incoming_addresses\t10.245.2.114:3306,10.245.0.86:3306\n"),
	}
	if v := JudgeGalera(changing, pods); v.Healthy || v.Split() {
		t.Errorf("a view change half-way: %+v, want unhealthy, no split", v)
	}
	for name, views := range map[string][]GaleraView{
		"joining":     {healthy[0], healthy[1], view("galera-2", strings.Replace(galeraOut, "Synced", "Joining: receiving State Transfer", 1))},
		"size":        {healthy[0], healthy[1], view("galera-2", strings.Replace(galeraOut, "size\t3", "size\t4", 1))},
		"non-primary": {healthy[0], healthy[1], view("galera-2", strings.Replace(strings.Replace(galeraOut, "Primary", "non-Primary", 1), "3626f7af", "00000000", 1))},
		"missing":     healthy[:2],
		"down":        {healthy[0], healthy[1], {Pod: "galera-2", Err: "wsrep status: exit 1"}},
	} {
		if v := JudgeGalera(views, pods); v.Healthy || v.Split() || v.Detail == "" {
			t.Errorf("%s: %+v, want unhealthy, no split, a detail", name, v)
		}
	}
}

func TestGaleraClientCommand(t *testing.T) {
	if got := (GaleraClient{Container: "mariadb"}).Command("SELECT 1"); !slices.Equal(got, []string{"mariadb", "-NB", "-e", "SELECT 1"}) {
		t.Errorf("as the container's user: %q", got)
	}
	if got := (GaleraClient{Container: "mysql", User: "root"}).Command("SELECT 1"); !slices.Equal(got, []string{"mariadb", "-NB", "-u", "root", "-e", "SELECT 1"}) {
		t.Errorf("as root: %q", got)
	}
}

// fakeGalera answers the campaign's mariadb commands in examples/apps/galera
// from fixtures: status by pod (galeraStatus), rows by pod (the count of
// GaleraMarkTable); a pod missing from status is down. It records the
// statements written.
type fakeGalera struct {
	status, rows map[string]string
	wrote        []string
}

func (f *fakeGalera) exec(_ context.Context, _, pod, container string, cmd ...string) (string, error) {
	stmts := cmd[len(cmd)-1]
	out, up := f.status[pod]
	switch {
	case container != GaleraContainer || !slices.Equal(cmd[:len(cmd)-1], []string{"mariadb", "-NB", "-e"}):
		return "", fmt.Errorf("unexpected command in %s: %q", container, cmd)
	case !up:
		return "ERROR 2002 (HY000): Can't connect to local server through socket\n", errors.New("command terminated with exit code 1")
	case stmts == galeraStatus:
		return out, nil
	case strings.Contains(stmts, "INSERT"):
		f.wrote = append(f.wrote, pod+": "+stmts)
		return f.rows[pod] + "\n", nil
	case strings.HasSuffix(stmts, "SELECT COUNT(*) FROM "+GaleraMarkTable):
		return f.rows[pod] + "\n", nil
	}
	return "", fmt.Errorf("unexpected statements %q", stmts)
}

func TestGaleraAppObserve(t *testing.T) {
	pods := []string{"galera-0", "galera-1", "galera-2"}
	synced := map[string]string{"galera-0": galeraOut, "galera-1": galeraOut, "galera-2": galeraOut}
	rows := map[string]string{"galera-0": "3", "galera-1": "3", "galera-2": "3"}
	with := func(m map[string]string, pod, v string) map[string]string {
		m = maps.Clone(m)
		if v == "" {
			delete(m, pod)
		} else {
			m[pod] = v
		}
		return m
	}
	other := strings.Replace(strings.Replace(galeraOut, "3626f7af", "99999999", 1), "size\t3", "size\t1", 1)
	for _, c := range []struct {
		name          string
		status, rows  map[string]string
		confirm       bool
		mark          string
		healthy       bool
		identities    int
		split, detail string
		progressBelow bool
	}{
		{name: "healthy", status: synced, healthy: true, identities: 1},
		{name: "healthy, the rows on every member", status: synced, rows: rows, confirm: true, mark: "3", healthy: true, identities: 1},
		{name: "more rows than acknowledged", status: synced, rows: with(rows, "galera-1", "4"), confirm: true, mark: "3", healthy: true, identities: 1},
		{name: "an acknowledged row lost", status: synced, rows: with(rows, "galera-2", "2"), confirm: true, mark: "3", identities: 1, detail: `galera-2: flock_campaign.acked has "2" rows, 3 acknowledged`},
		{name: "no table", status: synced, rows: with(rows, "galera-0", "ERROR 1146"), confirm: true, mark: "3", identities: 1, detail: "galera-0:"},
		{name: "rows not read without confirm", status: synced, rows: with(rows, "galera-2", "0"), mark: "3", healthy: true, identities: 1},
		{name: "joining", status: with(synced, "galera-2", strings.Replace(galeraOut, "Synced", "Joining: receiving State Transfer", 1)), identities: 1, detail: "not Synced", progressBelow: true},
		{name: "a member down", status: with(synced, "galera-1", ""), identities: 1, detail: "galera-1: wsrep status", progressBelow: true},
		{name: "size 2", status: with(synced, "galera-2", strings.Replace(galeraOut, "size\t3", "size\t2", 1)), identities: 1, detail: "cluster size 2, want 3"},
		{name: "two primary components", status: with(synced, "galera-2", other), identities: 2, split: `"3626f7af-f035-11f1-b1fb-1f26f40b00d3" "99999999-f035-11f1-b1fb-1f26f40b00d3"`, detail: "2 cluster state uuids"},
		{name: "one uuid, two primary components", status: map[string]string{
			"galera-0": galeraOut + "wsrep_incoming_addresses\t10.0.0.1:3306\n",
			"galera-1": galeraOut + "wsrep_incoming_addresses\t10.0.0.2:3306,10.0.0.3:3306\n",
			"galera-2": galeraOut + "wsrep_incoming_addresses\t10.0.0.3:3306,10.0.0.2:3306\n",
		}, identities: 1, split: "galera-0 and galera-1 in primary components with no member in common", detail: "no member in common"},
		{name: "a non-primary member is no second cluster", status: with(synced, "galera-2", strings.Replace(other, "Primary", "non-Primary", 1)), identities: 1, detail: "cluster status non-Primary", progressBelow: true},
	} {
		f := &fakeGalera{status: c.status, rows: c.rows}
		o := GaleraApp{}.Observe(context.Background(), Reader{Exec: f.exec}, "ns", pods, c.confirm, c.mark)
		if o.Healthy != c.healthy || len(o.Identities) != c.identities || !strings.Contains(o.Split, c.split) || (c.split == "") != (o.Split == "") || !strings.Contains(o.Detail, c.detail) || (c.healthy && o.Detail != "") {
			t.Errorf("%s: %+v, want healthy %v, %d identities, split %q, detail %q", c.name, o, c.healthy, c.identities, c.split, c.detail)
		}
		// Progress: 3 points per Synced primary member, and the largest
		// size reported: below that while a member is not there yet.
		if full := 3*3 + 3; (o.Progress < full) != c.progressBelow {
			t.Errorf("%s: progress %d, full %d: want below %v", c.name, o.Progress, full, c.progressBelow)
		}
	}
}

// TestGaleraAppObserveSockets: with the running containers known, the
// poll reads each member over its socket, never through an exec; a member
// whose mariadb container is not running is down.
func TestGaleraAppObserveSockets(t *testing.T) {
	pods := []string{"galera-0", "galera-1"}
	f := &fakeGalera{status: map[string]string{"galera-0": galeraOut, "galera-1": galeraOut}}
	r := Reader{Exec: f.exec, Containers: map[string]map[string]string{"galera-1": {"peer-finder": "abc"}}}
	o := GaleraApp{}.Observe(context.Background(), r, "ns", pods, false, "")
	if o.Healthy || !strings.Contains(o.Detail, "galera-0: mariadb not running") || !strings.Contains(o.Detail, "galera-1: mariadb not running") {
		t.Errorf("%+v; want both members down, their mariadb containers not running", o)
	}
}

func TestGaleraAppMark(t *testing.T) {
	pods := []string{"galera-0", "galera-1", "galera-2"}
	joining := strings.Replace(galeraOut, "Synced", "Joining: receiving State Transfer", 1)
	f := &fakeGalera{status: map[string]string{"galera-0": joining, "galera-1": galeraOut, "galera-2": galeraOut}, rows: map[string]string{"galera-1": "3"}}
	mark, err := GaleraApp{}.Mark(context.Background(), Reader{Exec: f.exec}, "campaign-flock-1-x", pods)
	if err != nil || mark != "3" {
		t.Fatalf("mark %q, %v; want 3 rows", mark, err)
	}
	if len(f.wrote) != 1 || !strings.HasPrefix(f.wrote[0], "galera-1: CREATE DATABASE IF NOT EXISTS flock_campaign;") ||
		strings.Count(f.wrote[0], "INSERT INTO flock_campaign.acked (tag) VALUES ('campaign-flock-1-x-") != galeraMarkRows {
		t.Errorf("wrote %q, want the table and %d rows through galera-1, the first Synced member", f.wrote, galeraMarkRows)
	}
	for name, f := range map[string]*fakeGalera{
		"no member answers": {status: map[string]string{}},
		"two clusters":      {status: map[string]string{"galera-0": galeraOut, "galera-1": strings.Replace(galeraOut, "3626f7af", "99999999", 1)}},
		"fewer rows held":   {status: map[string]string{"galera-0": galeraOut}, rows: map[string]string{"galera-0": "2"}},
		"write refused":     {status: map[string]string{"galera-0": galeraOut}, rows: map[string]string{"galera-0": "ERROR 1047 (08S01): WSREP has not yet prepared node for application use"}},
	} {
		if mark, err := (GaleraApp{}).Mark(context.Background(), Reader{Exec: f.exec}, "ns", pods); err == nil {
			t.Errorf("%s: mark %q, want an error", name, mark)
		}
	}
}

// newGaleraScripts is examples/apps/galera's scripts, its run and data
// directories moved into a temporary directory.
func newGaleraScripts(t *testing.T) exampleScripts {
	t.Helper()
	return newExampleScripts(t, "galera", "/run/mysqld", "/var/lib/mysql")
}

// TestGaleraOnStartWithoutRole runs examples/apps/galera's on-start.sh with
// sh as each subject of the campaign runs it: flock's peer-finder passes
// the member's FQDN, its role and the former; upstream's passes only the
// peers (its FQDNs, sorted) on stdin, so the lowest name visible forms and
// the others join. Paths are moved into a temporary directory, and the
// host name is a stub's.
func TestGaleraOnStartWithoutRole(t *testing.T) {
	peers := "galera-0.galera.ns.svc.cluster.local\ngalera-1.galera.ns.svc.cluster.local\n"
	for _, c := range []struct {
		name, host, peers string
		env               []string
		self, role        string
		former            string
	}{
		{name: "upstream, the lowest name", host: "galera-0", peers: peers, self: "galera-0.galera.ns.svc.cluster.local", role: "form"},
		{name: "upstream, another name is lower", host: "galera-1", peers: peers, self: "galera-1.galera.ns.svc.cluster.local", role: "join"},
		{name: "upstream, alone", host: "galera-1", peers: "galera-1.galera.ns.svc.cluster.local\n", self: "galera-1.galera.ns.svc.cluster.local", role: "form"},
		{name: "flock", host: "galera-0", peers: peers, env: []string{"PEER_FINDER_SELF=galera-0.galera.ns.svc.cluster.local", "PEER_FINDER_BOOTSTRAP=join", "PEER_FINDER_FORMER=galera-1.galera.ns.svc.cluster.local"},
			self: "galera-0.galera.ns.svc.cluster.local", role: "join", former: "galera-1.galera.ns.svc.cluster.local"},
	} {
		g := newGaleraScripts(t)
		g.stub("hostname", "echo "+c.host)
		cmd := g.command("on-start.sh", c.env...)
		cmd.Stdin = strings.NewReader(c.peers)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("%s: on-start.sh: %v: %s", c.name, err, out)
			continue
		}
		for file, want := range map[string]string{"self": c.self, "role": c.role, "former": c.former, "peers": strings.TrimSpace(c.peers)} {
			got, err := os.ReadFile(filepath.Join(g.run, file))
			if err != nil || strings.TrimSpace(string(got)) != want {
				t.Errorf("%s: %s %q (%v), want %q", c.name, file, got, err, want)
			}
		}
	}
}

// TestGaleraAliveProbe runs examples/apps/galera's alive.sh (the mariadb
// container's liveness probe) against a stub mariadb and clock: it passes
// while mariadbd is in the primary component or does not answer, and fails
// once it has been outside it for 60 s; back in the primary component, the
// count starts again.
func TestGaleraAliveProbe(t *testing.T) {
	g := newGaleraScripts(t)
	g.stub("mariadb", `[ -n "$STATUS" ] || exit 1; printf 'wsrep_cluster_status\t%s\n' "$STATUS"`)
	g.stub("date", `echo "$NOW"`)
	for i, step := range []struct {
		status string
		now    int
		fail   bool
	}{
		{status: "Primary", now: 100},
		{status: "non-Primary", now: 110},
		{status: "non-Primary", now: 169},
		{status: "", now: 175}, // not answering: passes, and forgets
		{status: "Disconnected", now: 180},
		{status: "Disconnected", now: 239},
		{status: "Disconnected", now: 240, fail: true},
		{status: "Primary", now: 250},
		{status: "non-Primary", now: 300},
		{status: "non-Primary", now: 350},
	} {
		cmd := g.command("alive.sh", "STATUS="+step.status, fmt.Sprintf("NOW=%d", step.now))
		out, err := cmd.CombinedOutput()
		if failed := err != nil; failed != step.fail {
			t.Errorf("step %d (%q at %d): failed %v (%v: %s), want %v", i, step.status, step.now, failed, err, out, step.fail)
		}
	}
}

// TestGaleraAliveProbeJoining runs examples/apps/galera's alive.sh while
// mariadbd joins and does not answer SQL yet: it passes while run.sh waits
// (no $RUN/joining) and while one of the addresses mariadbd started with
// answers on Galera's port, and fails once none has for 60 s (a joiner
// that started at once with its view of a primary component, waiting for
// members that wait for it); in the primary component it forgets them.
func TestGaleraAliveProbeJoining(t *testing.T) {
	g := newGaleraScripts(t)
	g.stub("mariadb", `[ -n "$STATUS" ] || exit 1; printf 'wsrep_cluster_status\t%s\n' "$STATUS"`)
	g.stub("date", `echo "$NOW"`)
	// No state transfer flows in; mariadbd listens on Galera's port.
	g.stub("ss", `[ "$1" != -Hltn ] || echo "LISTEN 0 80 0.0.0.0:4567 0.0.0.0:*"`)
	g.stub("resolveip", `case $2 in galera-0.galera) echo 10.0.0.1;; galera-2.galera) echo 10.0.0.3;; *) exit 1;; esac`)
	// timeout 5 mariadb and timeout 1 resolveip run the stubs; timeout 2
	// bash -c ': </dev/tcp/...' is a try on Galera's port.
	g.stub("timeout", fmt.Sprintf(`[ "$2" != bash ] && shift && exec "$@"; echo "$4" >> %s/tried; [ "$ANSWER" = yes ]`, g.run))
	joining := filepath.Join(g.run, "joining")
	for i, step := range []struct {
		status, answer string
		joining        bool // run.sh started mariadbd as a joiner
		now            int
		fail           bool
	}{
		{now: 100, answer: "no"}, // run.sh waits for a member to answer
		{now: 500, answer: "no"},
		{joining: true, now: 1000, answer: "no"},
		{joining: true, now: 1059, answer: "no"},
		{joining: true, now: 1060, answer: "no", fail: true},
		{joining: true, now: 1070, answer: "yes"}, // a state transfer from a donor
		{joining: true, now: 1200, answer: "no"},
		{joining: true, now: 1259, answer: "no"},
		{joining: true, now: 1260, answer: "no", fail: true},
		{joining: true, status: "Primary", now: 1270, answer: "no"},
		{now: 1400, answer: "no"}, // joined: SQL not answering is not this rule's
		{now: 1500, answer: "no"},
	} {
		if step.joining {
			g.write(joining, "galera-0.galera 10.0.0.1\ngalera-2.galera 10.0.0.3\n")
		} else if _, err := os.Stat(joining); err == nil && i < 10 {
			t.Fatalf("step %d: $RUN/joining exists", i)
		}
		os.Remove(filepath.Join(g.run, "tried"))
		cmd := g.command("alive.sh", "STATUS="+step.status, "ANSWER="+step.answer, fmt.Sprintf("NOW=%d", step.now))
		out, err := cmd.CombinedOutput()
		if failed := err != nil; failed != step.fail {
			t.Errorf("step %d (joining %v, answer %s at %d): failed %v (%v: %s), want %v", i, step.joining, step.answer, step.now, failed, err, out, step.fail)
		}
		tried, _ := os.ReadFile(filepath.Join(g.run, "tried"))
		if want := step.joining && step.status == ""; want != (string(tried) != "") || want && !strings.Contains(string(tried), "/dev/tcp/10.0.0.1/4567") || want && !strings.Contains(string(tried), "/dev/tcp/10.0.0.3/4567") {
			t.Errorf("step %d: tried %q; want both addresses tried %v", i, tried, want)
		}
		if step.status == "Primary" {
			if _, err := os.Stat(joining); !os.IsNotExist(err) {
				t.Errorf("step %d: in the primary component, $RUN/joining kept (%v)", i, err)
			}
		}
	}
}

// TestGaleraAliveProbeMoved runs examples/apps/galera's alive.sh while
// mariadbd joins, does not answer SQL yet and receives no state transfer,
// and a member it started with answers on Galera's port at another
// address (the campaign's galera-8 round 31: the former's node was killed
// while galera-1 and galera-2 waited for their first state transfer; it
// came back at a new address and formed again from its data, and the two
// joiners, Galera knowing only its old address, waited for each other
// outside a primary component, each answering the other): it fails once
// that has lasted 60 s, so the container restarts and joins the members at
// their addresses now. A state transfer flowing in (a connection on port
// 4444 or 4568) passes and starts the count again, and so does the moved
// member not answering.
func TestGaleraAliveProbeMoved(t *testing.T) {
	g := newGaleraScripts(t)
	g.stub("mariadb", "exit 1") // a joiner: no SQL yet
	g.stub("date", `echo "$NOW"`)
	g.stub("ss", `if [ "$1" = -Hltn ]; then echo "LISTEN 0 80 0.0.0.0:4567 0.0.0.0:*"; elif [ -n "$TRANSFER" ]; then echo "ESTAB 0 0 10.0.0.2:4444 10.0.0.1:40022"; fi`)
	// galera-0 came back at 10.0.0.9; galera-2 (10.0.0.3) is another joiner.
	g.stub("resolveip", `case $2 in galera-0.galera) echo "$FORMER";; galera-2.galera) echo 10.0.0.3;; *) exit 1;; esac`)
	// The addresses in $UP answer on Galera's port.
	g.stub("timeout", `[ "$2" != bash ] && shift && exec "$@"; a=${4#: </dev/tcp/}; case " $UP " in *" ${a%/4567} "*) exit 0;; esac; exit 1`)
	g.write(filepath.Join(g.run, "joining"), "galera-0.galera 10.0.0.1\ngalera-2.galera 10.0.0.3\n")
	for i, step := range []struct {
		former, up, transfer string
		now                  int
		fail                 bool
	}{
		{former: "10.0.0.1", up: "10.0.0.3", now: 100},          // the former is down, the other joiner answers
		{former: "10.0.0.9", up: "10.0.0.3", now: 110},          // the former is back elsewhere, not answering yet
		{former: "10.0.0.9", up: "10.0.0.3 10.0.0.9", now: 120}, // it answers: the count starts
		{former: "10.0.0.9", up: "10.0.0.3 10.0.0.9", now: 179},
		{former: "10.0.0.9", up: "10.0.0.3 10.0.0.9", now: 180, fail: true},      // 60 s
		{former: "10.0.0.9", up: "10.0.0.3 10.0.0.9", transfer: "yes", now: 190}, // a state transfer flows in
		{former: "10.0.0.9", up: "10.0.0.3 10.0.0.9", now: 200},                  // the count starts again
		{former: "10.0.0.9", up: "10.0.0.3 10.0.0.9", now: 259},
		{former: "10.0.0.9", up: "10.0.0.3", now: 265}, // the moved member stops answering: forgotten
		{former: "10.0.0.9", up: "10.0.0.3 10.0.0.9", now: 270},
		{former: "10.0.0.9", up: "10.0.0.3 10.0.0.9", now: 329},
		{former: "10.0.0.9", up: "10.0.0.3 10.0.0.9", now: 330, fail: true},
	} {
		out, err := g.command("alive.sh", "FORMER="+step.former, "UP="+step.up, "TRANSFER="+step.transfer, fmt.Sprintf("NOW=%d", step.now)).CombinedOutput()
		if failed := err != nil; failed != step.fail {
			t.Errorf("step %d (former at %s, %s answering, transfer %q, at %d): failed %v (%v: %s), want %v", i, step.former, step.up, step.transfer, step.now, failed, err, out, step.fail)
		}
		if step.fail && !strings.Contains(string(out), "galera-0.galera 10.0.0.9") {
			t.Errorf("step %d: the probe says %q; want it to name the member that moved and its address", i, out)
		}
	}
}

// TestGaleraAliveProbeLeft runs examples/apps/galera's alive.sh while
// mariadbd joins, does not answer SQL yet and receives no state transfer,
// and no longer listens on Galera's port (the campaign's galera-9 round
// 31: galera-2's incremental transfer failed, "node restart required",
// mariadbd closed its connection to the cluster and waited for the rest of
// the transfer forever, while the members it started with answered): it
// fails once that has lasted 20 s. Listening again, or a state transfer
// flowing in, starts the count again; ss failing is taken as listening.
func TestGaleraAliveProbeLeft(t *testing.T) {
	g := newGaleraScripts(t)
	g.stub("mariadb", "exit 1") // a joiner: no SQL yet
	g.stub("date", `echo "$NOW"`)
	g.stub("ss", `case $1/$LISTEN/$TRANSFER in -Hltn/yes/*) echo "LISTEN 0 80 0.0.0.0:4567 0.0.0.0:*";; -Hltn/fails/*) exit 1;; -Htn/*/yes) echo "ESTAB 0 0 10.0.0.2:4568 10.0.0.1:40022";; esac`)
	g.stub("resolveip", `case $2 in galera-0.galera) echo 10.0.0.1;; *) exit 1;; esac`)
	g.stub("timeout", `[ "$2" != bash ] && shift && exec "$@"; exit 0`) // the members answer
	g.write(filepath.Join(g.run, "joining"), "galera-0.galera 10.0.0.1\n")
	for i, step := range []struct {
		listen, transfer string
		now              int
		fail             bool
	}{
		{listen: "yes", now: 100},
		{listen: "no", now: 110}, // left the cluster: the count starts
		{listen: "no", now: 129},
		{listen: "no", now: 130, fail: true}, // 20 s
		{listen: "yes", now: 140},            // listening again: forgotten
		{listen: "no", now: 150},
		{listen: "no", now: 169},
		{listen: "no", transfer: "yes", now: 175}, // a state transfer flows in: forgotten
		{listen: "no", now: 180},
		{listen: "no", now: 199},
		{listen: "no", now: 200, fail: true},
		{listen: "fails", now: 300}, // ss fails: taken as listening
		{listen: "fails", now: 400},
	} {
		out, err := g.command("alive.sh", "LISTEN="+step.listen, "TRANSFER="+step.transfer, fmt.Sprintf("NOW=%d", step.now)).CombinedOutput()
		if failed := err != nil; failed != step.fail {
			t.Errorf("step %d (listening %s, transfer %q, at %d): failed %v (%v: %s), want %v", i, step.listen, step.transfer, step.now, failed, err, out, step.fail)
		}
		if step.fail && !strings.Contains(string(out), "4567 closed") {
			t.Errorf("step %d: the probe says %q; want it to say Galera's port is closed", i, out)
		}
	}
}

// TestGaleraRecoveredPosition runs examples/apps/galera's rank.sh and
// run.sh against a stub mariadbd on data that did not stop cleanly
// (grastate.dat's seqno -1): rank.sh prints the seqno InnoDB recovers, and
// run.sh, told form or join, starts mariadbd at the recovered position
// (--wsrep-start-position), so a member forming from that data keeps the
// cluster state uuid. After a clean stop (a seqno recorded) neither
// recovers.
func TestGaleraRecoveredPosition(t *testing.T) {
	const uuid = "74b3c9f4-f067-11f1-b39b-1a5c8a01c28e"
	for _, c := range []struct {
		name, seqno, role string
		rank, start       string
	}{
		{name: "crashed, form", seqno: "-1", role: "form", rank: "7", start: "--wsrep-new-cluster --wsrep-start-position=" + uuid + ":7"},
		{name: "crashed, join", seqno: "-1", role: "join", rank: "7", start: "--wsrep-start-position=" + uuid + ":7"},
		{name: "clean, form", seqno: "5", role: "form", rank: "5", start: "--wsrep-new-cluster"},
	} {
		g := newGaleraScripts(t)
		// --wsrep-recover logs the position, as mariadbd does; a start
		// prints its arguments after the config file.
		g.stub("mariadbd", `for a; do case $a in --log-error=*) log=${a#--log-error=};; esac; done
case " $* " in
*" --wsrep-recover "*) echo "2026-12-05  4:52:01 0 [Note] WSREP: Recovered position: `+uuid+`:7" > "$log";;
*) shift; echo "mariadbd $*";;
esac`)
		g.stub("hostname", "echo galera-0")
		if err := os.Mkdir(filepath.Join(g.data, "mysql"), 0o755); err != nil {
			t.Fatal(err)
		}
		g.write(filepath.Join(g.data, "grastate.dat"), "# GALERA saved state\nversion: 2.1\nuuid:    "+uuid+"\nseqno:   "+c.seqno+"\nsafe_to_bootstrap: 0\n")
		for file, text := range map[string]string{"self": "galera-0.galera", "role": c.role, "former": "galera-1.galera", "peers": "galera-0.galera\ngalera-1.galera"} {
			g.write(filepath.Join(g.run, file), text+"\n")
		}
		out, err := g.command("rank.sh").Output()
		if got := strings.TrimSpace(string(out)); err != nil || got != c.rank {
			t.Errorf("%s: rank.sh printed %q (%v), want %q", c.name, got, err, c.rank)
		}
		// A joiner waits for a member's Galera port: bash's /dev/tcp
		// stands in, answering at once.
		g.stub("timeout", "exit 0")
		out, err = g.command("run.sh").Output()
		if got, want := strings.TrimSpace(string(out)), "mariadbd "+c.start; err != nil || got != want {
			t.Errorf("%s: run.sh started %q (%v), want %q", c.name, got, err, want)
		}
	}
}

// TestGaleraInterruptedInstall runs examples/apps/galera's rank.sh and
// run.sh on a data directory whose install was cut short (the campaign's
// galera-9 round 38: galera-0's node killed while mariadb-install-db ran;
// mariadbd then aborted at every start on an ibdata1 of zeros, so its rank
// command failed for good): with run.sh's marker ($DATA/.installing) left,
// rank.sh says no data and run.sh wipes the directory and installs again;
// without it, data is never installed over, and a fresh directory is
// installed and the marker removed.
func TestGaleraInterruptedInstall(t *testing.T) {
	for _, c := range []struct {
		name            string
		mysql, marker   bool
		rank            string
		installs, wipes bool
	}{
		{name: "cut short", mysql: true, marker: true, installs: true, wipes: true},
		{name: "installed", mysql: true, rank: "5"},
		{name: "fresh", installs: true},
	} {
		g := newGaleraScripts(t)
		g.stub("mariadbd", `shift; echo "mariadbd $*"`)
		g.stub("mariadb-install-db", fmt.Sprintf(`echo installed >> %s/installs; mkdir -p %s/mysql`, g.run, g.data))
		g.stub("hostname", "echo galera-0")
		if c.mysql {
			if err := os.Mkdir(filepath.Join(g.data, "mysql"), 0o755); err != nil {
				t.Fatal(err)
			}
			g.write(filepath.Join(g.data, "ibdata1"), "")
			g.write(filepath.Join(g.data, "grastate.dat"), "uuid: 74b3c9f4-f067-11f1-b39b-1a5c8a01c28e\nseqno: 5\nsafe_to_bootstrap: 0\n")
		}
		if c.marker {
			g.write(filepath.Join(g.data, ".installing"), "")
		}
		out, err := g.command("rank.sh").Output()
		if got := strings.TrimSpace(string(out)); err != nil || got != c.rank {
			t.Errorf("%s: rank.sh printed %q (%v), want %q", c.name, got, err, c.rank)
		}
		for file, text := range map[string]string{"self": "galera-0.galera", "role": "form", "former": "galera-0.galera", "peers": "galera-0.galera"} {
			g.write(filepath.Join(g.run, file), text+"\n")
		}
		if out, err := g.command("run.sh").Output(); err != nil || !strings.HasPrefix(string(out), "mariadbd") {
			t.Errorf("%s: run.sh printed %q (%v); want mariadbd started", c.name, out, err)
		}
		installs, _ := os.ReadFile(filepath.Join(g.run, "installs"))
		if got := strings.Count(string(installs), "installed"); got != map[bool]int{true: 1}[c.installs] {
			t.Errorf("%s: mariadb-install-db ran %d times; want installs %v", c.name, got, c.installs)
		}
		if _, err := os.Stat(filepath.Join(g.data, "ibdata1")); c.mysql && os.IsNotExist(err) != c.wipes {
			t.Errorf("%s: ibdata1 removed %v; want %v", c.name, os.IsNotExist(err), c.wipes)
		}
		if _, err := os.Stat(filepath.Join(g.data, ".installing")); !os.IsNotExist(err) {
			t.Errorf("%s: the install marker is left (%v)", c.name, err)
		}
	}
}

// TestGaleraRestartAsksAgain runs examples/apps/galera's run.sh as a
// restarted mariadb container finds it: the role was used by the first
// start. Told its role by flock's peer-finder, it runs bootstrap.sh again
// (stubbed: peer-finder's answer through on-start.sh) and starts as that
// answer says, form or join; told nothing by upstream's, it joins. Each
// start uses the role once and starts the liveness probe's counts again.
func TestGaleraRestartAsksAgain(t *testing.T) {
	peers := "galera-0.galera\ngalera-1.galera\n"
	for _, c := range []struct {
		name, by, answer string
		start            string
	}{
		{name: "flock says form", by: "peer-finder", answer: "form", start: "mariadbd --wsrep-new-cluster"},
		{name: "flock says join", by: "peer-finder", answer: "join", start: "mariadbd"},
		{name: "upstream", by: "scripts", start: "mariadbd"},
	} {
		g := newGaleraScripts(t)
		g.stub("mariadbd", `shift; echo "mariadbd $*"`)
		g.stub("hostname", "echo galera-0")
		g.stub("timeout", "exit 0") // a member's Galera port answers
		if err := os.Mkdir(filepath.Join(g.data, "mysql"), 0o755); err != nil {
			t.Fatal(err)
		}
		g.write(filepath.Join(g.data, "grastate.dat"), "uuid: 74b3c9f4-f067-11f1-b39b-1a5c8a01c28e\nseqno: 5\nsafe_to_bootstrap: 0\n")
		g.write(filepath.Join(g.dir, "bootstrap.sh"), fmt.Sprintf("#!/bin/sh\necho asked >> %s/asked\nprintf '%s' | PEER_FINDER_SELF=galera-0.galera PEER_FINDER_BOOTSTRAP=%s PEER_FINDER_FORMER=galera-0.galera sh %s/on-start.sh >&2\n",
			g.run, peers, c.answer, g.dir))
		for file, text := range map[string]string{"self": "galera-0.galera", "former": "galera-0.galera", "peers": peers, "role-by": c.by} {
			g.write(filepath.Join(g.run, file), text+"\n")
		}
		// The liveness probe's counts, left by the container before.
		counts := []string{"non-primary-since", "unanswered-since", "moved-since", "closed-since"}
		for start := range 2 {
			for _, f := range counts {
				g.write(filepath.Join(g.run, f), "100\n")
			}
			out, err := g.command("run.sh").Output()
			if got := strings.TrimSpace(string(out)); err != nil || got != c.start {
				t.Errorf("%s, start %d: run.sh started %q (%v), want %q", c.name, start, got, err, c.start)
			}
			for _, f := range counts {
				if _, err := os.Stat(filepath.Join(g.run, f)); !os.IsNotExist(err) {
					t.Errorf("%s, start %d: the probe's count %s kept (%v); want every count started again", c.name, start, f, err)
				}
			}
			if _, err := os.Stat(filepath.Join(g.run, "role")); !os.IsNotExist(err) {
				t.Errorf("%s, start %d: the role file is kept (%v); want it used once", c.name, start, err)
			}
		}
		asked, _ := os.ReadFile(filepath.Join(g.run, "asked"))
		if want := map[string]int{"peer-finder": 2, "scripts": 0}[c.by]; strings.Count(string(asked), "asked") != want {
			t.Errorf("%s: bootstrap.sh ran %d times; want %d", c.name, strings.Count(string(asked), "asked"), want)
		}
	}
}

// TestGaleraCrashedJoinerStartsAtOnce runs examples/apps/galera's run.sh
// told join while no member answers on Galera's port: with a view of a
// primary component left by a crash (gvwstate.dat) it starts mariadbd at
// once, so that every member of that component can start and Galera
// restore it (after a crash of every member in place, all would wait for
// each other); an empty gvwstate.dat is removed and the member waits.
func TestGaleraCrashedJoinerStartsAtOnce(t *testing.T) {
	for _, c := range []struct {
		name, gvwstate string
		starts         bool
	}{
		{name: "a view of a primary component", gvwstate: "my_uuid: d3124bc8-1605-11e4-aa3d-ab44303c044a\n#vwbeg\nview_id: 3 0dae1307-1606-11e4-aa94-5255b1455aa0 12\n#vwend\n", starts: true},
		{name: "an empty view", gvwstate: ""},
	} {
		g := newGaleraScripts(t)
		g.stub("mariadbd", `shift; echo "mariadbd $*"`)
		g.stub("timeout", "exit 1") // no member answers
		g.stub("sleep", "exit 1")   // the wait ends the script (set -e) instead of sleeping
		if err := os.Mkdir(filepath.Join(g.data, "mysql"), 0o755); err != nil {
			t.Fatal(err)
		}
		g.stub("resolveip", `case $2 in galera-0.galera) echo 10.0.0.1;; galera-3.galera) echo 10.0.0.4;; *) exit 1;; esac`)
		g.write(filepath.Join(g.data, "gvwstate.dat"), c.gvwstate)
		for file, text := range map[string]string{"self": "galera-1.galera", "role": "join", "former": "galera-0.galera", "peers": "galera-0.galera\ngalera-1.galera\ngalera-2.galera\ngalera-3.galera"} {
			g.write(filepath.Join(g.run, file), text+"\n")
		}
		out, err := g.command("run.sh").Output()
		if started := err == nil && strings.TrimSpace(string(out)) == "mariadbd"; started != c.starts {
			t.Errorf("%s: run.sh started mariadbd %v (%q, %v); want %v", c.name, started, out, err, c.starts)
		}
		// The addresses mariadbd started with, for alive.sh: the names
		// that resolve (galera-2 does not).
		if joining, _ := os.ReadFile(filepath.Join(g.run, "joining")); c.starts && string(joining) != "galera-0.galera 10.0.0.1\ngalera-3.galera 10.0.0.4\n" || !c.starts && len(joining) > 0 {
			t.Errorf("%s: $RUN/joining %q; want the names that resolved and their addresses when mariadbd started", c.name, joining)
		}
		if _, err := os.Stat(filepath.Join(g.data, "gvwstate.dat")); os.IsNotExist(err) == c.starts {
			t.Errorf("%s: gvwstate.dat kept %v; want %v", c.name, !os.IsNotExist(err), c.starts)
		}
	}
}

// TestGaleraWaitingJoinerAsksAgain runs examples/apps/galera's run.sh told
// join while no member answers on Galera's port (every member stopped in
// place and waits to join): told by flock's peer-finder, it asks again
// after 30 s (bootstrap.sh, stubbed) and forms when the answer is form;
// told nothing by upstream's, it keeps waiting (the stubbed sleep ends the
// script after 100 s).
func TestGaleraWaitingJoinerAsksAgain(t *testing.T) {
	peers := "galera-0.galera\ngalera-1.galera\n"
	for _, c := range []struct {
		name, by string
		asked    int
		start    string
	}{
		{name: "flock", by: "peer-finder", asked: 1, start: "mariadbd --wsrep-new-cluster"},
		{name: "upstream", by: "scripts", asked: 0},
	} {
		g := newGaleraScripts(t)
		g.stub("mariadbd", `shift; echo "mariadbd $*"`)
		g.stub("timeout", "exit 1") // no member answers
		g.stub("sleep", fmt.Sprintf(`echo . >> %s/slept; [ "$(wc -l < %s/slept)" -lt 100 ]`, g.run, g.run))
		if err := os.Mkdir(filepath.Join(g.data, "mysql"), 0o755); err != nil {
			t.Fatal(err)
		}
		g.write(filepath.Join(g.data, "grastate.dat"), "uuid: 74b3c9f4-f067-11f1-b39b-1a5c8a01c28e\nseqno: 5\nsafe_to_bootstrap: 0\n")
		g.write(filepath.Join(g.dir, "bootstrap.sh"), fmt.Sprintf("#!/bin/sh\necho asked >> %s/asked\nprintf '%s' | PEER_FINDER_SELF=galera-1.galera PEER_FINDER_BOOTSTRAP=form PEER_FINDER_FORMER=galera-1.galera sh %s/on-start.sh >&2\n",
			g.run, peers, g.dir))
		for file, text := range map[string]string{"self": "galera-1.galera", "role": "join", "former": "galera-0.galera", "peers": peers, "role-by": c.by} {
			g.write(filepath.Join(g.run, file), text+"\n")
		}
		out, err := g.command("run.sh").Output()
		if got := strings.TrimSpace(string(out)); c.start != "" && (err != nil || got != c.start) || c.start == "" && got != "" {
			t.Errorf("%s: run.sh started %q (%v), want %q", c.name, got, err, c.start)
		}
		asked, _ := os.ReadFile(filepath.Join(g.run, "asked"))
		if n := strings.Count(string(asked), "asked"); n != c.asked {
			t.Errorf("%s: bootstrap.sh ran %d times; want %d", c.name, n, c.asked)
		}
		if slept, _ := os.ReadFile(filepath.Join(g.run, "slept")); c.asked > 0 && strings.Count(string(slept), ".") != 29 {
			t.Errorf("%s: asked after %d s of waiting; want 29 sleeps (30 tries)", c.name, strings.Count(string(slept), "."))
		}
	}
}
