package apps

import (
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
