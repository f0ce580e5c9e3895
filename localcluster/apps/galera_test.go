package apps

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
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

// TestGaleraOnStartWithoutRole runs examples/apps/galera's on-start.sh with
// sh as each subject of the campaign runs it: flock's peer-finder passes
// the member's FQDN, its role and the former; upstream's passes only the
// peers (its FQDNs, sorted) on stdin, so the lowest name visible forms and
// the others join. Paths are moved into a temporary directory, and the
// host name is a stub's.
func TestGaleraOnStartWithoutRole(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "examples", "apps", "galera", "scripts.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var cm struct{ Data map[string]string }
	if err := yaml.Unmarshal(b, &cm); err != nil {
		t.Fatal(err)
	}
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
		dir := t.TempDir()
		run, bin := filepath.Join(dir, "run"), filepath.Join(dir, "bin")
		for _, d := range []string{run, bin} {
			if err := os.Mkdir(d, 0o755); err != nil {
				t.Fatal(err)
			}
		}
		write := func(path, text string) {
			if err := os.WriteFile(path, []byte(text), 0o755); err != nil {
				t.Fatal(err)
			}
		}
		write(filepath.Join(dir, "lib.sh"), strings.Replace(cm.Data["lib.sh"], "RUN=/run/mysqld", "RUN="+run, 1))
		write(filepath.Join(dir, "on-start.sh"), strings.Replace(cm.Data["on-start.sh"], "/scripts/lib.sh", filepath.Join(dir, "lib.sh"), 1))
		write(filepath.Join(bin, "hostname"), "#!/bin/sh\necho "+c.host+"\n")
		cmd := exec.Command("sh", filepath.Join(dir, "on-start.sh"))
		cmd.Env = append([]string{"PATH=" + bin + ":" + os.Getenv("PATH")}, c.env...)
		cmd.Stdin = strings.NewReader(c.peers)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("%s: on-start.sh: %v: %s", c.name, err, out)
			continue
		}
		for file, want := range map[string]string{"self": c.self, "role": c.role, "former": c.former, "peers": strings.TrimSpace(c.peers)} {
			got, err := os.ReadFile(filepath.Join(run, file))
			if err != nil || strings.TrimSpace(string(got)) != want {
				t.Errorf("%s: %s %q (%v), want %q", c.name, file, got, err, want)
			}
		}
	}
}
