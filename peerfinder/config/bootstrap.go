package config

import (
	"flag"
	"fmt"
	"strconv"
	"strings"
	"time"
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
	// PodName is this pod's name: $POD_NAME, else the host name.
	PodName string
	// PodUID is $POD_UID (downward API metadata.uid); when empty and needed,
	// peer-finder reads its pod from the API.
	PodUID string
}

// NeedsAPI reports whether the bootstrap flags need Kubernetes API access.
func (b Bootstrap) NeedsAPI() bool { return b.ExpectAuto || b.ClusterLease != "" }

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
	if env.Getenv != nil {
		b.PodName, b.PodUID = env.Getenv("POD_NAME"), env.Getenv("POD_UID")
	}
	if b.PodName == "" {
		b.PodName = c.Hostname
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
