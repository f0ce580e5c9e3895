package main

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/flockd/flock/internal/testing/pfbinary"
)

// forbidden are packages peer-finder must not link (prefixes of import
// paths), each with the reason. They are most of what once made its binary
// 49.8 MB and its resident memory 4x upstream's (see bench/README.md,
// "Footprint"): client-go's clientset registers every built-in API group at
// init, and its informers, listers and apply configurations come with it.
var forbidden = map[string]string{
	"k8s.io/client-go/kubernetes":           "the full clientset and its scheme of every API group: use kube.Client",
	"k8s.io/client-go/informers":            "informer factories of every API group",
	"k8s.io/client-go/listers":              "listers of every API group",
	"k8s.io/client-go/applyconfigurations":  "apply configurations of every API group",
	"k8s.io/client-go/tools/leaderelection": "links the clientset (and informers): sink/leader elects itself",
	"k8s.io/client-go/tools/events":         "the events broadcaster links the clientset: package events sends itself",
	"k8s.io/client-go/tools/record":         "as tools/events",
	"k8s.io/client-go/discovery":            "the discovery client and the OpenAPI models",
	"k8s.io/client-go/gentype":              "links client-go/testing (fake clients, OpenAPI models): kube's typed clients",
	"k8s.io/client-go/testing":              "fake-client machinery",
	"k8s.io/kube-openapi":                   "OpenAPI models",
	"github.com/google/gnostic-models":      "OpenAPI models",
	"sigs.k8s.io/controller-runtime":        "the controller's framework",
	"github.com/flockd/flock/controller":    "the controller",
	"github.com/flockd/flock/api":           "the controller's API types",
	"github.com/flockd/flock/localcluster":  "the local cluster",
	"text/template":                         "its executor's MethodByName keeps every exported method of every type (4 MB): hostsfile evaluates its templates itself",
	"html/template":                         "as text/template",
	"k8s.io/api/batch":                      "Jobs' types (and through them scheduling/v1alpha3), 0.7 MB, for one label key: peer spells it",
	"k8s.io/api/scheduling":                 "as k8s.io/api/batch",
}

// allowed are exceptions under a forbidden prefix.
var allowed = map[string]string{
	"k8s.io/kube-openapi/pkg/util": "a string trie, imported by apimachinery/pkg/runtime; no models",
	"text/template/parse":          "the template parser alone, no reflection",
}

// TestLinksNoForbiddenPackage guards peer-finder's footprint: none of its
// dependencies is, or is under, a forbidden package.
func TestLinksNoForbiddenPackage(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", pfbinary.Package).Output()
	if err != nil {
		t.Fatalf("go list -deps %s: %v", pfbinary.Package, err)
	}
	deps := strings.Fields(string(out))
	if len(deps) < 50 {
		t.Fatalf("go list -deps printed %d packages; want peer-finder's whole dependency list", len(deps))
	}
	for _, dep := range deps {
		if _, ok := allowed[dep]; ok {
			continue
		}
		for prefix, why := range forbidden {
			if dep == prefix || strings.HasPrefix(dep, prefix+"/") {
				t.Errorf("peer-finder links %s (%s)", dep, why)
				break
			}
		}
	}
}
