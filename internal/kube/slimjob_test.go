package kube

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
)

// TestJobsListAsSlimJobs: Client.Jobs asks the API server for batch/v1
// Jobs in JSON with the list options as query parameters, and decodes the
// answer into SlimJobs (the fields -hosts-expect=auto reads; others are
// dropped).
func TestJobsListAsSlimJobs(t *testing.T) {
	var got *http.Request
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = r
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{
			"apiVersion": "batch/v1", "kind": "JobList", "metadata": map[string]any{"resourceVersion": "7"},
			"items": []any{map[string]any{
				"metadata": map[string]any{"name": "train-worker", "labels": map[string]any{"a": "b"}},
				"spec": map[string]any{"completions": 3, "parallelism": 3, "completionMode": "Indexed", "backoffLimit": 4,
					"template": map[string]any{"metadata": map[string]any{"labels": map[string]any{"role": "worker"}},
						"spec": map[string]any{"containers": []any{map[string]any{"name": "c", "image": "i"}}}}},
				"status": map[string]any{"active": 3},
			}},
		})
	}))
	defer srv.Close()
	c, err := NewClientForConfig(&rest.Config{Host: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	l, err := c.Jobs("ns").List(t.Context(), metav1.ListOptions{LabelSelector: "jobset.sigs.k8s.io/jobset-name=js"})
	if err != nil {
		t.Fatalf("list: %v", err)
	}
	if got.URL.Path != "/apis/batch/v1/namespaces/ns/jobs" || got.URL.Query().Get("labelSelector") != "jobset.sigs.k8s.io/jobset-name=js" {
		t.Errorf("request %s", got.URL)
	}
	if a := got.Header.Get("Accept"); a != "application/json, */*" {
		t.Errorf("Accept %q, want JSON", a)
	}
	if len(l.Items) != 1 || l.ResourceVersion != "7" {
		t.Fatalf("list %+v", l)
	}
	j := l.Items[0]
	if j.Name != "train-worker" || j.Labels["a"] != "b" || j.Spec.Completions == nil || *j.Spec.Completions != 3 ||
		j.Spec.CompletionMode != "Indexed" || j.Spec.Template.Metadata.Labels["role"] != "worker" {
		t.Errorf("job %+v", j)
	}
}
