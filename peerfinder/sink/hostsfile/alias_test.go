package hostsfile

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/flockd/flock/peerfinder/peer"
	"github.com/flockd/flock/peerfinder/sink"
)

// TestInvalidAliasesAreNeverWritten: alias templates that give a name that
// is not a valid host name (an underscore, upper case, a space, a leading
// dash) leave that alias out of the hosts file and report it; the peer's
// own name and its valid aliases are still written.
func TestInvalidAliasesAreNeverWritten(t *testing.T) {
	path := filepath.Join(t.TempDir(), "hosts")
	s, err := New(Options{
		Path: path, ID: "web",
		AliasTemplates: []string{
			"{{.Name}}.web",                  // valid
			"{{.Name}}_alias",                // underscore
			`{{index .Labels "nick"}}`,       // from a label: upper case, a space
			"-{{.Index}}",                    // leading dash
			"{{.Name}}.{{.Name}}.{{.Index}}", // valid, dotted
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	p0, p1 := sts("web-0", 0, "10.0.0.1"), sts("web-1", 1, "10.0.0.2")
	p0.Labels = map[string]string{"nick": "Primary"}
	p1.Labels = map[string]string{"nick": "second one"}
	set := peer.NewSet(p0, p1)

	plan := MakePlan(set, s.namer, AllFamilies, nil)
	for _, e := range plan.Entries {
		for _, a := range e.Aliases {
			if err := ValidName(a); err != nil {
				t.Errorf("plan entry %s has the invalid alias %q", e.Name, a)
			}
		}
	}
	var rejected []string
	for _, r := range plan.Rejected {
		rejected = append(rejected, r.Peer+": "+r.Reason)
	}
	if len(rejected) != 6 || !slices.ContainsFunc(rejected, func(r string) bool { return strings.Contains(r, `"web-0_alias"`) }) {
		t.Errorf("rejected %d aliases, want the 6 invalid ones reported:\n%s", len(rejected), strings.Join(rejected, "\n"))
	}

	if err := s.Apply(context.Background(), sink.Delivery{Set: set, Generation: 1, First: true}); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	want := "# BEGIN flock peer-finder web\n" +
		"10.0.0.1\tweb-0 web-0.web web-0.web-0.0\n" +
		"10.0.0.2\tweb-1 web-1.web web-1.web-1.1\n" +
		"# END flock peer-finder web\n"
	if string(b) != want {
		t.Errorf("hosts file:\n%s\nwant:\n%s", b, want)
	}
	for _, bad := range []string{"_alias", "Primary", "second one", "\t-0", " -0", " -1"} {
		if strings.Contains(string(b), bad) {
			t.Errorf("hosts file contains the invalid alias %q:\n%s", bad, b)
		}
	}
}
