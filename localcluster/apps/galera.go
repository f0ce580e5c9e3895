package apps

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// GaleraContainer is the container the mariadb client runs in, in
// examples/apps/galera.
const GaleraContainer = "mariadb"

// galeraStatus asks for the wsrep status variables a view needs, one
// "name<TAB>value" a line (mariadb -NB).
const galeraStatus = "SHOW GLOBAL STATUS WHERE Variable_name IN " +
	"('wsrep_cluster_state_uuid','wsrep_cluster_size','wsrep_local_state_comment','wsrep_cluster_status','wsrep_last_committed')"

// GaleraView is one pod's MariaDB's view of its Galera cluster, by its
// wsrep status variables (mariadb in the pod, as its user).
type GaleraView struct {
	Pod string
	// UUID is wsrep_cluster_state_uuid: the members of one cluster share it.
	UUID string
	// Size is wsrep_cluster_size, Status wsrep_cluster_status (Primary in a
	// primary component), State wsrep_local_state_comment (Synced when the
	// member serves).
	Size   int
	Status string
	State  string
	// LastCommitted is wsrep_last_committed: the seqno of the member's
	// newest write set.
	LastCommitted int64
	// Err says why the view is incomplete.
	Err string
}

// ParseGaleraStatus reads the output of galeraStatus.
func ParseGaleraStatus(pod, out string) GaleraView {
	v := GaleraView{Pod: pod, Size: -1, LastCommitted: -1}
	for line := range strings.Lines(out) {
		k, val, ok := strings.Cut(strings.TrimRight(line, "\r\n"), "\t")
		if !ok {
			continue
		}
		switch k {
		case "wsrep_cluster_state_uuid":
			v.UUID = val
		case "wsrep_cluster_size":
			v.Size, _ = strconv.Atoi(val)
		case "wsrep_cluster_status":
			v.Status = val
		case "wsrep_local_state_comment":
			v.State = val
		case "wsrep_last_committed":
			v.LastCommitted, _ = strconv.ParseInt(val, 10, 64)
		}
	}
	if v.UUID == "" || v.Size < 0 || v.State == "" {
		v.Err = fmt.Sprintf("no wsrep status in %q", out)
	}
	return v
}

// GaleraClient says where and how the mariadb client runs: in Container,
// as the container's user (socket authentication) when User is "", else
// as User without a password.
type GaleraClient struct {
	Container, User string
}

// Command is the client's command line running stmts.
func (c GaleraClient) Command(stmts string) []string {
	cmd := []string{"mariadb", "-NB"}
	if c.User != "" {
		cmd = append(cmd, "-u", c.User)
	}
	return append(cmd, "-e", stmts)
}

// ReadGalera asks pod's own MariaDB for its wsrep status.
func ReadGalera(ctx context.Context, ex Exec, ns, pod string, c GaleraClient) GaleraView {
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	out, err := ex(ctx, ns, pod, c.Container, c.Command(galeraStatus)...)
	if err != nil {
		return GaleraView{Pod: pod, Size: -1, LastCommitted: -1, Err: fmt.Sprintf("wsrep status: %v: %s", err, strings.TrimSpace(out))}
	}
	return ParseGaleraStatus(pod, out)
}

// ReadGaleraAll reads every pod's view, in parallel.
func ReadGaleraAll(ctx context.Context, ex Exec, ns string, pods []string, c GaleraClient) []GaleraView {
	return eachPod(pods, func(p string) GaleraView { return ReadGalera(ctx, ex, ns, p, c) })
}

// GaleraVerdict is what the views say about the cluster.
type GaleraVerdict struct {
	// Healthy: every pod answered with one cluster state uuid, a primary
	// component of exactly the pods (wsrep_cluster_size), and Synced.
	Healthy bool
	// UUIDs are the cluster state uuids the pods report, each once, in the
	// order of the pods; more than one among primary components is a split
	// brain.
	UUIDs []string
	// Detail says what is wrong, in words.
	Detail string
}

// Split reports two primary components with different cluster state
// uuids: two clusters formed.
func (v GaleraVerdict) Split() bool { return len(v.UUIDs) > 1 }

// UUID is the one cluster state uuid, or "".
func (v GaleraVerdict) UUID() string {
	if len(v.UUIDs) == 1 {
		return v.UUIDs[0]
	}
	return ""
}

// JudgeGalera judges views of the StatefulSet's pods (names).
func JudgeGalera(views []GaleraView, pods []string) GaleraVerdict {
	var v GaleraVerdict
	var problems []string
	seen := map[string]bool{}
	for _, g := range views {
		switch {
		case g.Err != "":
			problems = append(problems, fmt.Sprintf("%s: %s", g.Pod, g.Err))
			continue
		case g.Status != "Primary":
			problems = append(problems, fmt.Sprintf("%s: cluster status %s", g.Pod, g.Status))
		default:
			if !seen[g.UUID] {
				seen[g.UUID] = true
				v.UUIDs = append(v.UUIDs, g.UUID)
			}
		}
		if g.Size != len(pods) {
			problems = append(problems, fmt.Sprintf("%s: cluster size %d, want %d", g.Pod, g.Size, len(pods)))
		}
		if g.State != "Synced" {
			problems = append(problems, fmt.Sprintf("%s: %s, not Synced", g.Pod, g.State))
		}
	}
	if len(v.UUIDs) > 1 {
		problems = append(problems, fmt.Sprintf("%d cluster state uuids %q", len(v.UUIDs), v.UUIDs))
	}
	byPod := map[string]bool{}
	for _, g := range views {
		byPod[g.Pod] = true
	}
	for _, p := range pods {
		if !byPod[p] {
			problems = append(problems, fmt.Sprintf("no view of %s", p))
		}
	}
	v.Healthy = len(problems) == 0
	v.Detail = strings.Join(problems, "; ")
	return v
}
