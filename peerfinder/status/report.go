package status

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"

	corev1 "k8s.io/api/core/v1"
)

// ReportVersion is the version of `peer-finder status -o json`'s output
// (docs/status.md).
const ReportVersion = 1

// Report is a workload's members as `peer-finder status` saw them.
type Report struct {
	Version   int      `json:"version"`
	Namespace string   `json:"namespace"`
	Selector  string   `json:"selector"`
	Members   []Member `json:"members"`
}

// Member is one pod of the workload and, when its peer-finder answered,
// its /status document.
type Member struct {
	Pod   string `json:"pod"`
	Node  string `json:"node,omitempty"`
	Phase string `json:"phase"`
	// Ready is the pod's Ready condition.
	Ready bool `json:"ready"`
	// Error says why there is no Status: the pod is not running, has no
	// such port, or its peer-finder did not answer.
	Error  string    `json:"error,omitempty"`
	Status *Document `json:"status,omitempty"`
}

// Answered reports whether every member's peer-finder answered.
func (r Report) Answered() bool {
	for _, m := range r.Members {
		if m.Status == nil {
			return false
		}
	}
	return len(r.Members) > 0
}

// memberOf is the row of pod before its peer-finder is asked.
func memberOf(p *corev1.Pod) Member {
	m := Member{Pod: p.Name, Node: p.Spec.NodeName, Phase: string(p.Status.Phase)}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			m.Ready = c.Status == corev1.ConditionTrue
		}
	}
	return m
}

// proxyPort is the number of port in p: port itself when it is a number,
// else the container port of that name (in containers or init containers,
// where a native sidecar's is); an error when p is not running or has no
// such port.
func proxyPort(p *corev1.Pod, port string) (int32, error) {
	if p.Status.Phase != corev1.PodRunning {
		return 0, fmt.Errorf("pod is %s, not Running", strings.ToLower(string(p.Status.Phase)))
	}
	if n, err := strconv.ParseUint(port, 10, 16); err == nil {
		return int32(n), nil
	}
	for _, cs := range [][]corev1.Container{p.Spec.Containers, p.Spec.InitContainers} {
		for _, c := range cs {
			for _, cp := range c.Ports {
				if cp.Name == port {
					return cp.ContainerPort, nil
				}
			}
		}
	}
	return 0, fmt.Errorf("no container port named %q (peer-finder's -metrics-addr port; pass -port)", port)
}

// WriteJSON writes r as indented JSON.
func WriteJSON(w io.Writer, r Report) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// WriteTable writes r as a table for people: per member its pod's
// readiness, the generation it delivered last (and a newer one published
// but not delivered), the role and former delivered with it, the peers
// (first DNS label of each name), the gate holding the next delivery back
// and anything else to look at: a failing or waiting sink, a sink's
// warning, or why the member did not answer.
func WriteTable(w io.Writer, r Report) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "MEMBER\tREADY\tGEN\tROLE\tFORMER\tPEERS\tHELD BY\tNOTES")
	for _, m := range r.Members {
		ready := "no"
		if m.Ready {
			ready = "yes"
		}
		gen, role, former, peers, held := "-", "-", "-", "-", "-"
		notes := m.Error
		if d := m.Status; d != nil {
			if l := d.Delivered; l != nil {
				gen, peers = strconv.FormatUint(l.Generation, 10), shortNames(l.Peers)
				role, former = orDash(l.Bootstrap), orDash(short(l.Former))
			}
			if d.Generation > 0 && (d.Delivered == nil || d.Generation != d.Delivered.Generation) {
				gen += fmt.Sprintf(" (%d published)", d.Generation)
			}
			if h := d.HeldBy; h != nil {
				held = h.Gate + ": " + h.Detail
			}
			notes = strings.Join(documentNotes(*d), "; ")
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", m.Pod, ready, gen, role, former, peers, held, orDash(notes))
	}
	return tw.Flush()
}

// documentNotes are the sinks failing or waiting, unless heldBy already
// names them, and the sinks' warnings.
func documentNotes(d Document) []string {
	var notes []string
	for _, s := range d.Sinks {
		if s.State == "ok" || (d.HeldBy != nil && strings.HasPrefix(d.HeldBy.Detail, s.Name+": ")) {
			continue
		}
		notes = append(notes, fmt.Sprintf("sink %s %s: %s", s.Name, s.State, s.Error))
	}
	for _, w := range d.Warnings {
		notes = append(notes, "warning: "+w)
	}
	return notes
}

// short is name's first DNS label (web-0 of web-0.web.ns.svc.cluster.local).
func short(name string) string {
	first, _, _ := strings.Cut(name, ".")
	return first
}

func shortNames(names []string) string {
	if len(names) == 0 {
		return "(none)"
	}
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = short(n)
	}
	return strings.Join(out, ",")
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
