package sink_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/flockd/flock/peerfinder/peer"
	"github.com/flockd/flock/peerfinder/sink"
	"github.com/flockd/flock/peerfinder/sink/hostsfile"
	"github.com/flockd/flock/peerfinder/sink/jobfile"
)

// TestTFConfigSchema validates the TF_CONFIG that -rendezvous=tf writes
// (jobfile.Rendezvous.Vars) against docs/tf-config.schema.json, for a ranked
// member and one whose role is not ranked (no task); TF_CONFIGs that break
// the schema are refused, so the check can fail.
func TestTFConfigSchema(t *testing.T) {
	schema := sink.ReadSchema(t, "tf-config.schema.json")
	n, err := hostsfile.NewNamer("{{.Role}}-{{.Index}}", nil, "")
	if err != nil {
		t.Fatal(err)
	}
	pod := func(role string, index int) peer.Peer {
		return peer.Peer{FQDN: role + "." + string(rune('0'+index)), IPs: []string{"10.0.0." + string(rune('1'+index))}, Role: role, Ordinal: index}
	}
	set := peer.NewSet(pod("chief", 0), pod("worker", 0), pod("worker", 1), pod("ps", 0), pod("launcher", 0))
	for name, tc := range map[string]struct {
		self  string
		roles []string
	}{"worker": {pod("worker", 1).FQDN, nil}, "not ranked": {pod("launcher", 0).FQDN, []string{"chief", "worker", "ps"}}} {
		r := jobfile.Rendezvous{Ranker: jobfile.Ranker{Namer: n, Expected: []string{"worker-2"}, Roles: tc.roles}, Framework: jobfile.TF, Port: 2222}
		vars, err := r.Vars(sink.Delivery{Set: set, Self: tc.self})
		if err != nil || len(vars) != 1 || vars[0].Name != "TF_CONFIG" {
			t.Fatalf("%s: Vars = %v, %v", name, vars, err)
		}
		var doc any
		if err := json.Unmarshal([]byte(vars[0].Value), &doc); err != nil {
			t.Fatal(err)
		}
		if errs := sink.Validate(schema, schema, doc, "$"); len(errs) > 0 {
			t.Errorf("%s: TF_CONFIG %s breaks the schema:\n%s", name, vars[0].Value, strings.Join(errs, "\n"))
		}
	}
	for name, bad := range map[string]string{
		"no cluster":        `{"task":{"type":"worker","index":0}}`,
		"unknown field":     `{"cluster":{},"extra":1}`,
		"address a number":  `{"cluster":{"worker":[2222]}}`,
		"negative index":    `{"cluster":{},"task":{"type":"worker","index":-1}}`,
		"task without type": `{"cluster":{},"task":{"index":0}}`,
	} {
		var doc any
		if err := json.Unmarshal([]byte(bad), &doc); err != nil {
			t.Fatal(err)
		}
		if errs := sink.Validate(schema, schema, doc, "$"); len(errs) == 0 {
			t.Errorf("%s: %s passes the schema", name, bad)
		}
	}
}
