package source

import (
	"fmt"
	"log/slog"
	"strings"

	"github.com/miekg/dns"
	"k8s.io/apimachinery/pkg/util/validation"
)

// Rejected is a name a source was given and did not deliver, and why.
type Rejected struct {
	Target string
	Reason string
}

// String returns "target (reason)" for logs.
func (r Rejected) String() string { return r.Target + " (" + r.Reason + ")" }

// Member is the member rule of the sources that see only names (DNS, a
// static file). It returns target's first label when target is a member of
// service: exactly one label below it, and that label a valid RFC 1123
// label (letters, digits and inner '-': no '_', no leading '-' that a hook
// would read as an option). Both names are compared in lower case, with or
// without the trailing dot. Anything else — a foreign name, localhost,
// another service's member, a name deeper below the service, spaces, quotes,
// non-ASCII — could shadow a real member's name in the hosts file and count
// toward -expect, so it is rejected with the reason.
func Member(target, service string) (string, error) {
	target, service = dns.CanonicalName(target), dns.CanonicalName(service)
	if !isHostName(target) || !dns.IsSubDomain(service, target) || dns.CountLabel(target) != dns.CountLabel(service)+1 {
		return "", fmt.Errorf("not a member of %s", strings.TrimSuffix(service, "."))
	}
	label, _, _ := strings.Cut(target, ".")
	if errs := validation.IsDNS1123Label(label); len(errs) > 0 {
		return "", fmt.Errorf("not an RFC 1123 name: %s", strings.Join(errs, "; "))
	}
	return label, nil
}

// isHostName reports whether name (absolute, lower case) is a host name made
// of letters, digits, '-' and '_' (not the root, no escaped bytes).
func isHostName(name string) bool {
	if name == "." || len(name) > 254 {
		return false
	}
	for label := range strings.SplitSeq(strings.TrimSuffix(name, "."), ".") {
		if label == "" || len(label) > 63 {
			return false
		}
		for _, c := range []byte(label) {
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
				return false
			}
		}
	}
	return true
}

// RejectLog logs the names a source rejected once per change of what is
// rejected. The zero value is ready; it is not safe for concurrent use.
type RejectLog struct {
	last string // the rejected names last seen
}

// Log records rejected (sorted) and logs msg as a warning with name and the
// rejected names when they differ from the last call's; nothing when none
// is rejected.
func (r *RejectLog) Log(log *slog.Logger, msg, name string, rejected []Rejected) {
	key := fmt.Sprint(rejected)
	if key == r.last {
		return
	}
	r.last = key
	if len(rejected) > 0 {
		log.Warn(msg, "name", name, "rejected", rejected) //nolint:sloglint // msg is each caller's constant
	}
}
