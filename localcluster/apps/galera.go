package apps

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"log"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"
)

// GaleraContainer is the container the mariadb client runs in, in
// examples/apps/galera.
const GaleraContainer = "mariadb"

// galeraStatus asks for the wsrep status variables a view needs, one
// "name<TAB>value" a line (mariadb -NB).
const galeraStatus = "SHOW GLOBAL STATUS WHERE Variable_name IN " +
	"('wsrep_cluster_state_uuid','wsrep_cluster_size','wsrep_local_state_comment','wsrep_cluster_status','wsrep_last_committed','wsrep_incoming_addresses')"

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
	// Members is wsrep_incoming_addresses, sorted: the client addresses
	// of the members of the member's component, as each announced it.
	Members []string
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
		case "wsrep_incoming_addresses":
			for _, a := range strings.Split(val, ",") {
				if a = strings.TrimSpace(a); a != "" && a != "AUTO" {
					v.Members = append(v.Members, a)
				}
			}
		}
	}
	slices.Sort(v.Members)
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

// galeraSocket is the server's socket in the mariadb container
// (examples/apps/galera's scripts: $RUN/mysqld.sock).
const galeraSocket = "/run/mysqld/mysqld.sock"

// ReadGaleraSocket asks the MariaDB in the container whose root (as this
// machine sees it, ContainerRoot) is root for its wsrep status over its
// socket, as this machine's root: the example's root@localhost
// authenticates by socket, as the container's user does with mariadb in
// an exec. The question and the parsing are ReadGalera's.
func ReadGaleraSocket(ctx context.Context, pod, root string) GaleraView {
	ctx, cancel := context.WithTimeout(ctx, tcpTimeout)
	defer cancel()
	failed := func(err error) GaleraView {
		return GaleraView{Pod: pod, Size: -1, LastCommitted: -1, Err: fmt.Sprintf("wsrep status over the socket: %v", err)}
	}
	cfg := mysql.NewConfig()
	cfg.User, cfg.Net, cfg.Addr, cfg.Timeout = "root", "unix", root+galeraSocket, tcpTimeout
	cfg.Logger = mysql.Logger(log.New(io.Discard, "", 0)) // its errors are returned
	connector, err := mysql.NewConnector(cfg)
	if err != nil {
		return failed(err)
	}
	db := sql.OpenDB(connector)
	defer db.Close()
	rows, err := db.QueryContext(ctx, galeraStatus)
	if err != nil {
		return failed(err)
	}
	defer rows.Close()
	var out strings.Builder
	for rows.Next() {
		var k, v string
		if err := rows.Scan(&k, &v); err != nil {
			return failed(err)
		}
		fmt.Fprintf(&out, "%s\t%s\n", k, v)
	}
	if err := rows.Err(); err != nil {
		return failed(err)
	}
	return ParseGaleraStatus(pod, out.String())
}

// readGaleraSockets reads every pod's view over its socket, in parallel;
// a pod whose mariadb container is not running gets a view saying so.
func readGaleraSockets(ctx context.Context, r Reader, pods []string) []GaleraView {
	return eachPod(pods, func(pod string) GaleraView {
		root, err := ContainerRoot(r.Containers[pod][GaleraContainer])
		if err != nil {
			return GaleraView{Pod: pod, Size: -1, LastCommitted: -1, Err: fmt.Sprintf("%s not running: %v", GaleraContainer, err)}
		}
		return ReadGaleraSocket(ctx, pod, root)
	})
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
	// Forked names two members in primary components with no member in
	// common: two clusters of one history (a member that bootstrapped
	// from its own data beside the running cluster keeps its state uuid).
	Forked string
	// Detail says what is wrong, in words.
	Detail string
}

// Split reports two primary components at once: with different cluster
// state uuids, or with one and no member in common.
func (v GaleraVerdict) Split() bool { return len(v.UUIDs) > 1 || v.Forked != "" }

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
	if v.Forked = forked(views); v.Forked != "" {
		problems = append(problems, v.Forked)
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

// forked names the first two members in primary components whose
// members (wsrep_incoming_addresses) have none in common, or is "". Each
// member lists itself and the members that were there before it; a list
// may lag a view change by its newest joiners, so two members of one
// component share at least the older of them. A view without addresses
// is left out.
func forked(views []GaleraView) string {
	var primary []GaleraView
	for _, g := range views {
		if g.Err == "" && g.Status == "Primary" && len(g.Members) > 0 {
			primary = append(primary, g)
		}
	}
	for i, a := range primary {
		for _, b := range primary[i+1:] {
			if !slices.ContainsFunc(a.Members, func(m string) bool { return slices.Contains(b.Members, m) }) {
				return fmt.Sprintf("%s and %s in primary components with no member in common (%s; %s)",
					a.Pod, b.Pod, strings.Join(a.Members, ","), strings.Join(b.Members, ","))
			}
		}
	}
	return ""
}

// GaleraProgress scores how far views of a bootstrapping Galera cluster got
// (see Observation.Progress): per pod, one point for answering, one for
// being in a primary component, one for Synced; plus the largest
// wsrep_cluster_size any of them reports. It is pure.
func GaleraProgress(views []GaleraView) int {
	score, most := 0, 0
	for _, g := range views {
		if g.Err != "" {
			continue
		}
		score++
		if g.Status == "Primary" {
			score++
		}
		if g.State == "Synced" {
			score++
		}
		most = max(most, g.Size)
	}
	return score + most
}

// GaleraApp is Galera's oracle: one cluster state uuid, a primary
// component of exactly the pods, every member Synced (the wsrep status of
// mariadb in each pod), and no acknowledged row lost: the rows Mark wrote
// through one member once healthy are on every member afterwards.
type GaleraApp struct{}

// GaleraMarkTable is the table Mark writes its acknowledged rows to.
const GaleraMarkTable = "flock_campaign.acked"

// galeraMarkRows is how many rows Mark writes, one transaction each.
const galeraMarkRows = 3

// galeraClient is how the campaign runs mariadb in examples/apps/galera.
var galeraClient = GaleraClient{Container: GaleraContainer}

// Observe reads Galera's views (see App): each member's wsrep status over
// its socket from this machine (ReadGaleraSocket), or with confirm, or a
// Reader without r.Containers, through mariadb in an exec; with confirm
// and a mark, the acknowledged rows on every member.
func (GaleraApp) Observe(ctx context.Context, r Reader, ns string, pods []string, confirm bool, mark string) Observation {
	var views []GaleraView
	if confirm || r.Containers == nil {
		views = ReadGaleraAll(ctx, r.Exec, ns, pods, galeraClient)
	} else {
		views = readGaleraSockets(ctx, r, pods)
	}
	v := JudgeGalera(views, pods)
	o := Observation{Healthy: v.Healthy, Progress: GaleraProgress(views), Detail: v.Detail}
	for _, id := range v.UUIDs {
		o.Identities = append(o.Identities, "cluster state uuid "+id)
	}
	switch {
	case len(v.UUIDs) > 1:
		o.Split = fmt.Sprintf("primary components with cluster state uuids %q at once", v.UUIDs)
	case v.Forked != "":
		o.Split = v.Forked
	}
	if !confirm || mark == "" || !o.Healthy {
		return o
	}
	rows := eachPod(pods, func(pod string) string {
		ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		defer cancel()
		// wsrep_sync_wait: the count waits for every write set the
		// cluster committed before it (a causal read on any member).
		out, err := r.Exec(ctx, ns, pod, GaleraContainer, galeraClient.Command("SET SESSION wsrep_sync_wait=1; SELECT COUNT(*) FROM "+GaleraMarkTable)...)
		if err != nil {
			return fmt.Sprintf("%v: %s", err, lastLines(out, 2))
		}
		return strings.TrimSpace(out)
	})
	if problems := missingRows(pods, rows, mark); len(problems) > 0 {
		o.Healthy, o.Detail = false, strings.Join(problems, "; ")
	}
	return o
}

// missingRows says which of pods hold fewer rows than mark (Mark's count)
// or could not count them; rows[i] is what pods[i]'s count printed. It is
// pure.
func missingRows(pods, rows []string, mark string) []string {
	want, err := strconv.Atoi(mark)
	if err != nil {
		return []string{fmt.Sprintf("mark %q is no row count", mark)}
	}
	var problems []string
	for i, got := range rows {
		if n, err := strconv.Atoi(got); err != nil || n < want {
			problems = append(problems, fmt.Sprintf("%s: %s has %q rows, %d acknowledged", pods[i], GaleraMarkTable, got, want))
		}
	}
	return problems
}

// Mark creates GaleraMarkTable once and writes galeraMarkRows rows through
// the first Synced member of the primary component, each acknowledged
// (autocommit: mariadb exits 0 once Galera certified it), and returns how
// many rows that member then holds: Observe wants at least as many on
// every member.
func (GaleraApp) Mark(ctx context.Context, r Reader, ns string, pods []string) (string, error) {
	views := ReadGaleraAll(ctx, r.Exec, ns, pods, galeraClient)
	v := JudgeGalera(views, pods)
	if v.UUID() == "" {
		return "", fmt.Errorf("mark: cluster state uuids %q", v.UUIDs)
	}
	writer := ""
	for _, g := range views {
		if g.Err == "" && g.Status == "Primary" && g.State == "Synced" {
			writer = g.Pod
			break
		}
	}
	if writer == "" {
		return "", fmt.Errorf("mark: no Synced member: %s", v.Detail)
	}
	stmts := "CREATE DATABASE IF NOT EXISTS flock_campaign; CREATE TABLE IF NOT EXISTS " + GaleraMarkTable +
		" (id INT AUTO_INCREMENT PRIMARY KEY, tag VARCHAR(80) NOT NULL);"
	for i := range galeraMarkRows {
		stmts += fmt.Sprintf(" INSERT INTO %s (tag) VALUES ('%s-%d');", GaleraMarkTable, ns, i)
	}
	stmts += " SELECT COUNT(*) FROM " + GaleraMarkTable
	ctx, cancel := context.WithTimeout(ctx, 40*time.Second)
	defer cancel()
	out, err := r.Exec(ctx, ns, writer, GaleraContainer, galeraClient.Command(stmts)...)
	if err != nil {
		return "", fmt.Errorf("mark: write rows through %s: %w: %s", writer, err, lastLines(out, 3))
	}
	n, err := strconv.Atoi(strings.TrimSpace(out))
	if err != nil || n < galeraMarkRows {
		return "", fmt.Errorf("mark: %s holds %q rows after writing %d", writer, strings.TrimSpace(out), galeraMarkRows)
	}
	return strconv.Itoa(n), nil
}
