package controller_test

import (
	"flag"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/yaml"
)

// The requests the tests' controllers make (as their ServiceAccount), as
// "verb group/resource[/subresource]".
var (
	usedMu sync.Mutex
	used   = map[string]bool{}
)

// recordRequests wraps a controller's transport to note each request.
func recordRequests(rt http.RoundTripper) http.RoundTripper {
	return roundTripFunc(func(req *http.Request) (*http.Response, error) {
		p, ok := permissionOf(req)
		resp, err := rt.RoundTrip(req)
		if !ok {
			return resp, err
		}
		usedMu.Lock()
		defer usedMu.Unlock()
		used[p] = true
		verb, res, _ := strings.Cut(p, " ")
		// A server-side apply that creates the object (201) is authorized
		// as create too.
		if verb == "patch" && err == nil && resp.StatusCode == http.StatusCreated {
			used["create "+res] = true
		}
		// client-go's informers list by a watch with sendInitialEvents
		// (watch-list) and fall back to a plain list where the API server
		// does not serve it: such a watch stands for the list.
		if verb == "watch" && req.URL.Query().Get("sendInitialEvents") == "true" {
			used["list "+res] = true
		}
		return resp, err
	})
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// permissionOf is the RBAC verb and resource of a resource request.
func permissionOf(req *http.Request) (string, bool) {
	parts := strings.Split(strings.Trim(req.URL.Path, "/"), "/")
	var group string
	switch {
	case len(parts) >= 3 && parts[0] == "api":
		parts = parts[2:]
	case len(parts) >= 4 && parts[0] == "apis":
		group, parts = parts[1], parts[3:]
	default:
		return "", false
	}
	if len(parts) >= 3 && parts[0] == "namespaces" {
		parts = parts[2:]
	}
	resource, named := parts[0], len(parts) >= 2
	if len(parts) >= 3 {
		resource += "/" + parts[2]
	}
	var verb string
	switch req.Method {
	case http.MethodGet:
		verb = "list"
		if named {
			verb = "get"
		} else if req.URL.Query().Get("watch") == "true" {
			verb = "watch"
		}
	case http.MethodPost:
		verb = "create"
	case http.MethodPut:
		verb = "update"
	case http.MethodPatch:
		verb = "patch"
	case http.MethodDelete:
		verb = "delete"
		if !named {
			verb = "deletecollection"
		}
	default:
		return "", false
	}
	return verb + " " + group + "/" + resource, true
}

// unprovable are granted verbs no test on the local cluster can exercise,
// with the reason.
var unprovable = map[string]string{
	"update flockd.io/flocks/finalizers": "needed for blockOwnerDeletion only where the OwnerReferencesPermissionEnforcement admission plugin is on",
}

// unusedPermissions lists the verbs the checked-in roles grant that no
// controller in the tests used.
func unusedPermissions() ([]string, error) {
	var missing []string
	for _, path := range []string{rolePath, leaderRolePath} {
		raw, err := os.ReadFile(path)
		if err != nil {
			return nil, err
		}
		var role struct {
			Rules []rbacv1.PolicyRule `json:"rules"`
		}
		if err := yaml.Unmarshal(raw, &role); err != nil {
			return nil, fmt.Errorf("parse %s: %w", path, err)
		}
		for _, r := range role.Rules {
			for _, g := range r.APIGroups {
				for _, res := range r.Resources {
					for _, v := range r.Verbs {
						p := v + " " + g + "/" + res
						if _, ok := unprovable[p]; !used[p] && !ok {
							missing = append(missing, path+": "+p)
						}
					}
				}
			}
		}
	}
	slices.Sort(missing)
	return missing, nil
}

// TestMain checks, after a full run (no -run filter) in which every test
// passed, that the controller's roles grant no verb the controllers did
// not use: least privilege, each verb shown needed. (That the roles grant
// enough is shown by every test: its controller runs with exactly them.)
func TestMain(m *testing.M) {
	flag.Parse()
	code := m.Run()
	if code == 0 && flag.Lookup("test.run").Value.String() == "" && len(used) > 0 {
		missing, err := unusedPermissions()
		switch {
		case err != nil:
			fmt.Fprintln(os.Stderr, "rbac check:", err)
			code = 1
		case len(missing) > 0:
			fmt.Fprintf(os.Stderr, "FAIL: the controller's roles grant verbs no test used (drop them, or show they are needed):\n  %s\n", strings.Join(missing, "\n  "))
			code = 1
		}
	}
	os.Exit(code)
}
