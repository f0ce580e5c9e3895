package hostsfile

import (
	"strings"
	"testing"
	"text/template"
)

// TestTemplateMatchesTextTemplate: every template the host name evaluator
// accepts gives text/template's output (with missingkey=zero, as before).
func TestTemplateMatchesTextTemplate(t *testing.T) {
	members := []Member{
		{Name: "ps-0", FQDN: "ps-0.train.ns.svc.cluster.local", Pod: "train-ps-0-abcde", Role: "ps", Index: "0", Ordinal: 0,
			Node: "n1", Zone: "z1", Labels: map[string]string{"role": "ps", "app": "train"}},
		{Name: "web-3", FQDN: "web-3.web.ns.svc.cluster.local", Index: "3", Ordinal: 3},
		{Ordinal: -1},
	}
	templates := []string{
		"{{.Name}}", "{{.FQDN}}", "{{.Pod}}", "{{.Role}}-{{.Index}}", "{{.Ordinal}}", "{{.Node}}.{{.Zone}}",
		`{{index .Labels "role"}}-{{.Index}}`, "{{.Labels.app}}", "{{.Labels.missing}}x", "{{.Labels}}", "{{len .Labels}}", "{{len .Name}}",
		`{{printf "%s-%d" .Role .Ordinal}}`, `{{.Name | printf "%s.x"}}`, `{{print .Role .Index}}`, `{{println .Name}}`,
		`{{if eq .Role "ps"}}p{{else if eq .Role ""}}none{{else}}w{{end}}-{{.Index}}`,
		`{{if and .Role .Index}}{{.Role}}{{end}}`, `{{or .Role "member"}}`, `{{not .Role}}`, `{{ne .Ordinal 0}}`, `{{eq .Ordinal 3 0}}`,
		"  {{- .Name -}}  ", "{{/* a comment */}}{{.Name}}", `{{(printf "%s" .Name) | len}}`, "{{true}}", "{{3}}", `{{"lit"}}`, "plain",
	}
	for _, text := range templates {
		ours, err := parseTemplate("t", text)
		if err != nil {
			t.Errorf("parseTemplate(%q): %v", text, err)
			continue
		}
		theirs := template.Must(template.New("t").Option("missingkey=zero").Parse(text))
		for _, m := range members {
			got, err := ours.execute(m)
			if err != nil {
				t.Errorf("%q on %+v: %v", text, m, err)
				continue
			}
			var want strings.Builder
			if err := theirs.Execute(&want, m); err != nil {
				t.Fatalf("text/template %q: %v", text, err)
			}
			if got != want.String() {
				t.Errorf("%q on %s: got %q, text/template %q", text, m.Name, got, want.String())
			}
		}
	}
}

// FuzzTemplate: a template the evaluator accepts never panics, and gives
// text/template's output whenever text/template executes it without error.
func FuzzTemplate(f *testing.F) {
	for _, s := range []string{"{{.Name}}", `{{index .Labels "role"}}-{{.Index}}`, `{{if eq .Role "ps"}}p{{else}}w{{end}}`, `{{printf "%s-%d" .Role .Ordinal}}`, "{{or .Role .Name | len}}"} {
		f.Add(s)
	}
	m := Member{Name: "ps-0", FQDN: "ps-0.t.ns.svc", Role: "ps", Index: "0", Ordinal: 0, Labels: map[string]string{"role": "ps"}}
	f.Fuzz(func(t *testing.T, text string) {
		ours, err := parseTemplate("t", text)
		if err != nil {
			return
		}
		got, err := ours.execute(m)
		theirs, perr := template.New("t").Option("missingkey=zero").Parse(text)
		if perr != nil {
			t.Fatalf("accepted %q, which text/template refuses: %v", text, perr)
		}
		var want strings.Builder
		if terr := theirs.Execute(&want, m); terr != nil || err != nil {
			return // errors may differ in wording and in which comes first
		}
		if got != want.String() {
			t.Fatalf("%q: got %q, text/template %q", text, got, want.String())
		}
	})
}
