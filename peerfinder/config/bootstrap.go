package config

import (
	"flag"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/flockd/flock/peerfinder/sink/hook"
)

// Bootstrap holds the flags of bootstrap safety: the expected size, the
// bootstrap timeout and the cluster record for the form/join role.
type Bootstrap struct {
	// Expect is the expected number of members (0: no gate); ExpectAuto
	// reads it from the owning StatefulSet's spec.replicas instead.
	Expect     int
	ExpectAuto bool
	// Timeout is -bootstrap-timeout (0: wait forever).
	Timeout time.Duration
	// ClusterLease names the Lease that records that the cluster was formed
	// ("" : no record; the ordinal rule alone decides the role).
	ClusterLease string
	// FormRank is -form-rank: the command line printing this member's data
	// position ("": off; the ordinal and record rules decide). FormRankArgv
	// splits it.
	FormRank string
	// FormRankQuorum is -form-rank-quorum: the number of ranks that decide
	// while others are missing (0: every expected member's).
	FormRankQuorum int
	// PodName is this pod's name: $POD_NAME, else the host name.
	PodName string
	// PodUID is $POD_UID (downward API metadata.uid); when empty and needed,
	// peer-finder reads its pod from the API.
	PodUID string
}

// NeedsAPI reports whether the bootstrap flags need Kubernetes API access.
func (b Bootstrap) NeedsAPI() bool { return b.ExpectAuto || b.ClusterLease != "" }

// FormRankArgv is -form-rank's argv, nil when off; FormRank was checked
// by Parse.
func (b Bootstrap) FormRankArgv() []string {
	if b.FormRank == "" {
		return nil
	}
	argv, err := hook.ParseCommand(b.FormRank)
	if err != nil {
		return nil
	}
	return argv
}

// expectFlag is -expect: a number or "auto".
type expectFlag Bootstrap

func (e *expectFlag) String() string {
	if e == nil {
		return "0"
	}
	if e.ExpectAuto {
		return "auto"
	}
	return strconv.Itoa(e.Expect)
}

func (e *expectFlag) Set(s string) error {
	if strings.TrimSpace(s) == "auto" {
		e.ExpectAuto, e.Expect = true, 0
		return nil
	}
	n, err := strconv.Atoi(strings.TrimSpace(s))
	if err != nil || n < 0 {
		return fmt.Errorf("want a number of members or auto, got %q", s)
	}
	e.ExpectAuto, e.Expect = false, n
	return nil
}

// addBootstrapFlags registers the bootstrap flags on fs.
func (c *Config) addBootstrapFlags(fs *flag.FlagSet) {
	b := &c.Bootstrap
	fs.Var((*expectFlag)(b), "expect", "Deliver only when this many members are visible: a `number`, or auto for spec.replicas of the StatefulSet that owns this pod (followed live; in init mode with OrderedReady pods, this member and the ordinals below it, the most such a StatefulSet can start; needs get on pods and list,watch on statefulsets). 0 disables.")
	fs.DurationVar(&b.Timeout, "bootstrap-timeout", 0, "Give up when the first peer set was not delivered within this long, exiting with status 3 (meant for init-container mode); 0 waits forever.")
	fs.StringVar(&b.FormRank, "form-rank", "", "Form by data: a `command` (a path, or a command line split by shell-word rules without a shell) printing this member's data position, a decimal integer, larger is newer, -1 or nothing for no data (e.g. the seqno of Galera's grastate.dat). On a cold start of a formed cluster (the -cluster-lease former's pod is gone or asked again, and no expected member is Ready), every expected member's rank is awaited (a member told its role until it asks again) and the highest forms (ties: the lowest ordinal), recorded in the Lease. Needs -cluster-lease and -expect, and get on the expected members' pods.")
	fs.IntVar(&b.FormRankQuorum, "form-rank-quorum", 0, "With -form-rank, decide once this many `members` have a rank (a failed rank command counts as missing) instead of awaiting every expected member: a member left out may hold newer data. 0 awaits all.")
	fs.StringVar(&b.ClusterLease, "cluster-lease", "", "Record in this coordination.k8s.io Lease `name` which pod formed the cluster and each member's data identity (claim UIDs), so a member that lost its data (pod-0 with an empty volume) is told PEER_FINDER_BOOTSTRAP=join while any member's data exists, and a cluster whose data is all gone forms again. Needs create on leases, get,update on this Lease, get on pods and persistentvolumeclaims.")
}

// completeBootstrap validates the bootstrap flags and reads POD_NAME and
// POD_UID.
func (c *Config) completeBootstrap(env Env) error {
	b := &c.Bootstrap
	if b.Timeout < 0 {
		return usage("bootstrap-timeout", "must not be negative, got %v", b.Timeout)
	}
	if b.ClusterLease != "" && !isSubdomain(b.ClusterLease) {
		return usage("cluster-lease", "%q is not a valid object name (lower-case DNS subdomain)", b.ClusterLease)
	}
	if err := b.checkFormRank(); err != nil {
		return err
	}
	if env.Getenv != nil {
		b.PodName, b.PodUID = env.Getenv("POD_NAME"), env.Getenv("POD_UID")
	}
	if b.PodName == "" {
		b.PodName = c.Hostname
	}
	return nil
}

// checkFormRank validates -form-rank and -form-rank-quorum.
func (b *Bootstrap) checkFormRank() error {
	switch {
	case b.FormRank == "" && b.FormRankQuorum != 0:
		return usage("form-rank-quorum", "needs -form-rank")
	case b.FormRank == "":
		return nil
	case b.ClusterLease == "":
		return usage("form-rank", "needs -cluster-lease: the member with the highest rank is recorded there, so that exactly one forms")
	case b.Expect == 0 && !b.ExpectAuto:
		return usage("form-rank", "needs -expect (a number or auto): the ranks of every expected member are awaited")
	case b.FormRankQuorum < 0:
		return usage("form-rank-quorum", "must not be negative, got %d", b.FormRankQuorum)
	case b.Expect > 0 && b.FormRankQuorum > b.Expect:
		return usage("form-rank-quorum", "%d is more than the %d expected members (-expect)", b.FormRankQuorum, b.Expect)
	}
	if _, err := hook.ParseCommand(b.FormRank); err != nil {
		return usage("form-rank", "%v", err)
	}
	return nil
}

// isSubdomain reports whether s is a lower-case RFC 1123 subdomain, the
// rule for most Kubernetes object names.
func isSubdomain(s string) bool {
	if len(s) == 0 || len(s) > 253 {
		return false
	}
	for label := range strings.SplitSeq(s, ".") {
		if !isLabel(label) || strings.ToLower(label) != label {
			return false
		}
	}
	return true
}
