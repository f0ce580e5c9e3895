package sink

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/flockd/flock/peerfinder/peer"
)

// TestDocumentSchema validates what peer-finder emits (MarshalDocument, the
// bytes of -format=json and -json-file) against docs/peer-document.schema.json:
// a document with every field of every type set, and a minimal one. The
// schema forbids unknown properties, so a field added to Document, Peer or
// Port without the schema fails here; documents that break the schema are
// refused, so the check can fail.
func TestDocumentSchema(t *testing.T) {
	schema := readSchema(t, "peer-document.schema.json")
	if v := schema["properties"].(map[string]any)["version"].(map[string]any)["const"]; v != float64(DocumentVersion) {
		t.Errorf("schema is for version %v, documents are version %d", v, DocumentVersion)
	}
	full := Delivery{Self: "db-0.db.ns.svc.cluster.local", Generation: 7, Bootstrap: "join", Former: "db-1.db.ns.svc.cluster.local", Set: peer.NewSet(
		peer.Peer{FQDN: "db-0.db.ns.svc.cluster.local", Name: "db-0", IPs: []string{"10.0.0.1", "fd00::1"}, Ready: true, Serving: true, Terminating: true,
			Pod: "db-0", UID: "u0", Node: "n1", Zone: "z1", Ordinal: 0, Role: "worker",
			Ports: []peer.Port{{Name: "peer", Port: 2888, Protocol: "TCP"}}, Labels: map[string]string{"app": "db"}, CPUMillicores: 1500},
		peer.Peer{FQDN: "db-1.db.ns.svc.cluster.local", Ordinal: -1},
	)}
	for name, d := range map[string]Delivery{"full": full, "minimal": {Self: "a", Generation: 1}} {
		b, err := MarshalDocument(d)
		if err != nil {
			t.Fatal(err)
		}
		var doc any
		if err := json.Unmarshal(b, &doc); err != nil {
			t.Fatal(err)
		}
		if errs := validate(schema, schema, doc, "$"); len(errs) > 0 {
			t.Errorf("%s document %s breaks the schema:\n%s", name, b, strings.Join(errs, "\n"))
		}
	}
	for name, bad := range map[string]string{
		"unknown field":   `{"version":1,"self":"a","generation":1,"peers":[],"extra":1}`,
		"other version":   `{"version":2,"self":"a","generation":1,"peers":[]}`,
		"ordinal as text": `{"version":1,"self":"a","generation":1,"peers":[{"fqdn":"a","ready":true,"ordinal":"0"}]}`,
		"no peers":        `{"version":1,"self":"a","generation":1}`,
		"bad role":        `{"version":1,"self":"a","generation":1,"bootstrap":"lead","peers":[]}`,
	} {
		var doc any
		if err := json.Unmarshal([]byte(bad), &doc); err != nil {
			t.Fatal(err)
		}
		if errs := validate(schema, schema, doc, "$"); len(errs) == 0 {
			t.Errorf("%s: %s passes the schema", name, bad)
		}
	}
}

// readSchema reads and decodes docs/<name>.
func readSchema(t *testing.T, name string) map[string]any {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("..", "..", "docs", name))
	if err != nil {
		t.Fatal(err)
	}
	var schema map[string]any
	if err := json.Unmarshal(raw, &schema); err != nil {
		t.Fatalf("schema %s: %v", name, err)
	}
	return schema
}

// validate checks v against the subset of JSON Schema the document schema
// uses: $ref to #/$defs, type, const, enum, required, properties,
// additionalProperties (false or a schema), items, minimum, maximum.
func validate(root, s map[string]any, v any, at string) []string {
	if ref, ok := s["$ref"].(string); ok {
		name := strings.TrimPrefix(ref, "#/$defs/")
		return validate(root, root["$defs"].(map[string]any)[name].(map[string]any), v, at)
	}
	var errs []string
	fail := func(format string, args ...any) { errs = append(errs, at+": "+fmt.Sprintf(format, args...)) }
	if c, ok := s["const"]; ok && c != v {
		fail("%v, want %v", v, c)
	}
	if e, ok := s["enum"].([]any); ok && !slices.Contains(e, v) {
		fail("%v not in %v", v, e)
	}
	if typ, ok := s["type"].(string); ok {
		okType := false
		switch typ {
		case "object":
			_, okType = v.(map[string]any)
		case "array":
			_, okType = v.([]any)
		case "string":
			_, okType = v.(string)
		case "boolean":
			_, okType = v.(bool)
		case "integer":
			f, isNum := v.(float64)
			okType = isNum && f == math.Trunc(f)
		}
		if !okType {
			fail("%v is not %s", v, typ)
			return errs
		}
	}
	if f, ok := v.(float64); ok {
		if lo, ok := s["minimum"].(float64); ok && f < lo {
			fail("%v below %v", f, lo)
		}
		if hi, ok := s["maximum"].(float64); ok && f > hi {
			fail("%v above %v", f, hi)
		}
	}
	if obj, ok := v.(map[string]any); ok {
		props, _ := s["properties"].(map[string]any)
		for _, r := range asStrings(s["required"]) {
			if _, ok := obj[r]; !ok {
				fail("missing %q", r)
			}
		}
		for k, val := range obj {
			if ps, ok := props[k].(map[string]any); ok {
				errs = append(errs, validate(root, ps, val, at+"."+k)...)
				continue
			}
			switch ap := s["additionalProperties"].(type) {
			case bool:
				if !ap {
					fail("unknown property %q", k)
				}
			case map[string]any:
				errs = append(errs, validate(root, ap, val, at+"."+k)...)
			}
		}
	}
	if arr, ok := v.([]any); ok {
		if items, ok := s["items"].(map[string]any); ok {
			for i, it := range arr {
				errs = append(errs, validate(root, items, it, fmt.Sprintf("%s[%d]", at, i))...)
			}
		}
	}
	return errs
}

func asStrings(v any) []string {
	var out []string
	list, _ := v.([]any)
	for _, x := range list {
		out = append(out, x.(string))
	}
	return out
}
