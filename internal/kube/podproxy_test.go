package kube

import (
	"net/http"
	"net/http/httptest"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/rest"
)

// TestPodProxyGet: the request goes to the pod's proxy subresource with
// the port in the name; a 2xx body comes back whole, a 404 is an error
// that apierrors.IsNotFound recognises.
func TestPodProxyGet(t *testing.T) {
	var got *http.Request
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = r
		if r.URL.Path != "/api/v1/namespaces/ns/pods/web-0:9090/proxy/status" {
			http.NotFound(w, r)
			return
		}
		_, _ = w.Write([]byte(`{"version":1}`))
	}))
	defer srv.Close()
	c, err := NewClientForConfig(&rest.Config{Host: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	b, err := c.PodProxy("ns").Get(t.Context(), "web-0", 9090, "/status")
	if err != nil || string(b) != `{"version":1}` {
		t.Fatalf("Get = %q, %v; want the body (request %s)", b, err, got.URL)
	}
	if a := got.Header.Get("Accept"); a != "application/json" {
		t.Errorf("Accept %q, want application/json", a)
	}
	if _, err := c.PodProxy("ns").Get(t.Context(), "web-0", 9090, "/nothing"); !apierrors.IsNotFound(err) {
		t.Errorf("Get of a missing path = %v, want a NotFound error", err)
	}
}
