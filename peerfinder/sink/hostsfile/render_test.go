package hostsfile

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/flockd/flock/internal/ordinal"
	"github.com/flockd/flock/internal/testing/golden"
	"github.com/flockd/flock/peerfinder/peer"
)

// job builds a batch-job member with role and Job completion index labels.
func job(role, index string, ips ...string) peer.Peer {
	return peer.Peer{
		FQDN:    role + "-" + index + ".jobs.default.svc.cluster.local",
		Name:    role + "-" + index + "-x7k2p",
		Pod:     role + "-" + index + "-x7k2p",
		IPs:     ips,
		Ready:   true,
		Ordinal: -1,
		Role:    role,
		Labels:  map[string]string{ordinal.JobCompletionIndexLabel: index, "role": role},
	}
}

func sts(name string, ordinal int, ips ...string) peer.Peer {
	return peer.Peer{
		FQDN: name + ".web.default.svc.cluster.local", Name: name, Pod: name, IPs: ips,
		Ready: true, Ordinal: ordinal,
	}
}

func TestRenderGolden(t *testing.T) {
	for _, tc := range []struct {
		name     string
		in       string // testdata/<in>.in is the current file
		id       string
		template string
		aliases  []string
		family   Family
		expected string
		peers    []peer.Peer
	}{
		{
			name: "kubelet-default-names", in: "kubelet",
			peers: []peer.Peer{sts("web-1", 1, "10.244.2.3"), sts("web-0", 0, "10.244.1.2"), sts("web-10", 10, "10.244.3.4")},
		},
		{
			name: "batch-role-index-pending", in: "kubelet", id: "train",
			template: "{{.Role}}-{{.Index}}", expected: "ps=1,worker=3",
			peers: []peer.Peer{job("ps", "0", "10.244.1.7"), job("worker", "1", "10.244.2.9"), job("worker", "0", "10.244.1.8")},
		},
		{
			name: "replace-existing-block", in: "existing", id: "train",
			template: `{{index .Labels "role"}}-{{.Index}}`,
			peers:    []peer.Peer{job("ps", "0", "10.0.0.1"), job("worker", "0", "10.0.0.2")},
		},
		{
			name: "dual-stack-all", in: "empty", aliases: []string{"{{.FQDN}}"},
			peers: []peer.Peer{sts("web-0", 0, "fd00::a", "10.0.0.1"), sts("web-1", 1, "10.0.0.2")},
		},
		{
			name: "ipv6-only", in: "empty", family: IPv6, expected: "web-0,web-1",
			peers: []peer.Peer{sts("web-0", 0, "fd00::a", "10.0.0.1"), sts("web-1", 1, "10.0.0.2")},
		},
		{
			name: "invalid-names-skipped", in: "empty", template: "{{.Role}}-{{.Index}}",
			peers: []peer.Peer{
				job("ps", "0", "10.0.0.1"),
				job("Worker", "0", "10.0.0.2"),                                     // upper case
				{FQDN: "x.svc", Name: "x", IPs: []string{"10.0.0.3"}, Ordinal: -1}, // no role, no index: "-"
				job("under_score", "1", "10.0.0.4"),
			},
		},
		{
			name: "retried-pod-shadows-terminating", in: "empty", template: "{{.Role}}-{{.Index}}",
			peers: func() []peer.Peer {
				old := job("worker", "0", "10.0.0.2")
				old.Terminating, old.Ready = true, false
				newer := job("worker", "0", "10.0.0.9")
				newer.FQDN, newer.Name = "worker-0-new.jobs.default.svc.cluster.local", "worker-0-new"
				return []peer.Peer{old, newer}
			}(),
		},
		{
			name: "crlf-and-no-trailing-newline", in: "crlf", id: "x",
			peers: []peer.Peer{sts("web-0", 0, "10.0.0.1")},
		},
		{
			name: "other-block-untouched", in: "other", id: "mine",
			peers: []peer.Peer{sts("web-0", 0, "10.0.0.1")},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			current, err := os.ReadFile(filepath.Join("testdata", tc.in+".in"))
			if err != nil {
				t.Fatal(err)
			}
			n, err := NewNamer(tc.template, tc.aliases, "")
			if err != nil {
				t.Fatal(err)
			}
			expected, err := ParseExpected(tc.expected)
			if err != nil {
				t.Fatal(err)
			}
			plan := MakePlan(peer.NewSet(tc.peers...), n, tc.family, expected)
			got, err := Render(current, tc.id, Block(tc.id, plan))
			if err != nil {
				t.Fatal(err)
			}
			// The report (rejected, shadowed) is part of the golden output.
			var report strings.Builder
			for _, r := range plan.Rejected {
				report.WriteString("rejected " + r.Peer + ": " + r.Reason + "\n")
			}
			for _, r := range plan.Shadowed {
				report.WriteString("shadowed " + r.Peer + ": " + r.Reason + "\n")
			}
			golden.Check(t, tc.name+".hosts", got)
			golden.Check(t, tc.name+".report", []byte(report.String()))

			// Rendering the output again is a fixed point (unchanged bytes).
			again, err := Render(got, tc.id, Block(tc.id, plan))
			if err != nil || string(again) != string(got) {
				t.Errorf("second render differs (err %v):\n%s", err, again)
			}
		})
	}
}

func TestRenderErrors(t *testing.T) {
	for _, tc := range []struct{ name, in string }{
		{"begin-without-end", "a\n# BEGIN flock peer-finder\n1.1.1.1\tx\n"},
		{"nested-begin", "# BEGIN flock peer-finder\n# BEGIN flock peer-finder\n# END flock peer-finder\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if out, err := Render([]byte(tc.in), "", Block("", Plan{})); err == nil {
				t.Errorf("Render = %q, nil; want an error", out)
			}
		})
	}
}

func TestOutsideBytesPreserved(t *testing.T) {
	// Whatever the block, the bytes before and after it are kept exactly.
	before := "127.0.0.1 localhost\t \n\n#comment\r\n"
	after := "10.0.0.1 a b c   \nno-newline"
	begin, end := Markers("id")
	current := before + begin + "\nstuff\n" + end + "\n" + after
	for _, plan := range []Plan{{}, {Entries: []Entry{{IP: "1.2.3.4", Name: "x"}}}, {Pending: []string{"y"}}} {
		out, err := Render([]byte(current), "id", Block("id", plan))
		if err != nil {
			t.Fatal(err)
		}
		s := string(out)
		if !strings.HasPrefix(s, before) || !strings.HasSuffix(s, after) {
			t.Errorf("outside bytes changed:\n%q", s)
		}
	}
}

func TestParseExpected(t *testing.T) {
	for _, tc := range []struct {
		spec string
		want []string
		err  bool
	}{
		{"", nil, false},
		{"ps=1,worker=3", []string{"ps-0", "worker-0", "worker-1", "worker-2"}, false},
		{"worker=11", []string{"worker-0", "worker-1", "worker-2", "worker-3", "worker-4", "worker-5", "worker-6", "worker-7", "worker-8", "worker-9", "worker-10"}, false},
		{" launcher , worker=1 ", []string{"launcher", "worker-0"}, false},
		{"ps=0", nil, false},
		{"ps=x", nil, true},
		{"ps=-1", nil, true},
		{"Bad_Name", nil, true},
		{"UP=1", nil, true},
		{"a,a,b=1,b-0", []string{"a", "b-0"}, false},
	} {
		got, err := ParseExpected(tc.spec)
		if (err != nil) != tc.err || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("ParseExpected(%q) = %q, %v; want %q, err %v", tc.spec, got, err, tc.want, tc.err)
		}
	}
}

func TestExpectedFromCount(t *testing.T) {
	for _, tc := range []struct {
		self string
		n    int
		want []string
		err  bool
	}{
		{"web-2.web.ns.svc.cluster.local", 3, []string{"web-0", "web-1", "web-2"}, false},
		{"my-db-0", 1, []string{"my-db-0"}, false},
		{"web", 2, nil, true},
		{"web-x", 2, nil, true},
		{"-1", 2, nil, true},
	} {
		got, err := ExpectedFromCount(tc.self, tc.n)
		if (err != nil) != tc.err || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("ExpectedFromCount(%q, %d) = %q, %v; want %q, err %v", tc.self, tc.n, got, err, tc.want, tc.err)
		}
	}
}

func TestMemberIndex(t *testing.T) {
	for _, tc := range []struct {
		name       string
		p          peer.Peer
		indexLabel string
		want       string
	}{
		{"statefulset label", peer.Peer{Name: "a", Ordinal: 7, Labels: map[string]string{ordinal.PodIndexLabel: "3"}}, "", "3"},
		{"job label", peer.Peer{Name: "a", Ordinal: -1, Labels: map[string]string{ordinal.JobCompletionIndexLabel: "4"}}, "", "4"},
		{"named label first", peer.Peer{Name: "a", Ordinal: -1, Labels: map[string]string{"rank": "9", ordinal.PodIndexLabel: "3"}}, "rank", "9"},
		{"named label missing falls back", peer.Peer{Name: "a", Ordinal: -1, Labels: map[string]string{ordinal.PodIndexLabel: "3"}}, "rank", "3"},
		{"ordinal", peer.Peer{Name: "a", Ordinal: 2}, "", "2"},
		{"unknown", peer.Peer{Name: "a", Ordinal: -1}, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n, err := NewNamer("", nil, tc.indexLabel)
			if err != nil {
				t.Fatal(err)
			}
			if got := n.MemberOf(tc.p).Index; got != tc.want {
				t.Errorf("Index = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestNamerErrors(t *testing.T) {
	if _, err := NewNamer("{{.Role", nil, ""); err == nil {
		t.Error("unterminated template accepted")
	}
	if _, err := NewNamer("", []string{"{{"}, ""); err == nil {
		t.Error("bad alias template accepted")
	}
	// Unknown fields and constructs are found when parsing, not per peer.
	for _, bad := range []string{"{{.NoSuchField}}", "{{.Name.x}}", "{{range .Labels}}x{{end}}", "{{$x := .Name}}{{$x}}", `{{template "t"}}`, "{{with .Role}}{{.}}{{end}}"} {
		if _, err := NewNamer(bad, nil, ""); err == nil {
			t.Errorf("NewNamer(%q) accepted", bad)
		}
	}
	n, err := NewNamer(`{{printf "%d" .Name}}{{index .Labels 3}}`, nil, "")
	if err != nil {
		t.Fatal(err)
	}
	plan := MakePlan(peer.NewSet(sts("web-0", 0, "10.0.0.1")), n, AllFamilies, nil)
	if len(plan.Entries) != 0 || len(plan.Rejected) != 1 {
		t.Errorf("index by a number: plan = %+v; want the peer rejected", plan)
	}
}

func TestParseFamily(t *testing.T) {
	for in, want := range map[string]Family{"": AllFamilies, "all": AllFamilies, "ipv4": IPv4, "IPv6": IPv6} {
		if got, err := ParseFamily(in); err != nil || got != want {
			t.Errorf("ParseFamily(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	if _, err := ParseFamily("ipx"); err == nil {
		t.Error("ParseFamily(ipx) succeeded")
	}
}

func TestNaturalCompare(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		want int
	}{
		{"worker-2", "worker-10", -1}, {"worker-10", "worker-2", 1}, {"a", "a", 0},
		{"ps-0", "worker-0", -1}, {"w-02", "w-2", 0}, {"w", "w-0", -1}, {"a1b", "a1a", 1},
	} {
		if got := naturalCompare(tc.a, tc.b); got != tc.want {
			t.Errorf("naturalCompare(%q, %q) = %d, want %d", tc.a, tc.b, got, tc.want)
		}
	}
}
