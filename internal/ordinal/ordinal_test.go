package ordinal

import (
	"testing"

	batchv1 "k8s.io/api/batch/v1"
)

// TestJobCompletionIndexLabel keeps the spelled-out key equal to k8s.io/api's
// (only the test links batch/v1).
func TestJobCompletionIndexLabel(t *testing.T) {
	if JobCompletionIndexLabel != batchv1.JobCompletionIndexAnnotation {
		t.Fatalf("JobCompletionIndexLabel = %q, want batchv1.JobCompletionIndexAnnotation %q", JobCompletionIndexLabel, batchv1.JobCompletionIndexAnnotation)
	}
}

func TestFromName(t *testing.T) {
	for name, want := range map[string]int{
		"web-0": 0, "web-12": 12, "my-db-3": 3, "a-b-3": 3, "web": -1, "web-": -1, "-3": -1, "-1": -1,
		"web-01": -1, "web-x": -1, "web-+1": -1, "api-7d9f8-x2k9p": -1,
		"10-1-2-3": -1, "fd00--a-1": -1, "web-99999999999999999999": -1, "web-2147483648": -1,
	} {
		if got := FromName(name); got != want {
			t.Errorf("FromName(%q) = %d, want %d", name, got, want)
		}
	}
}

func TestOf(t *testing.T) {
	for _, tt := range []struct {
		name, sts string
		labels    map[string]string
		want      int
	}{
		{"web-2", "", map[string]string{PodIndexLabel: "2"}, 2},
		{"train-worker-3-abcde", "", map[string]string{JobCompletionIndexLabel: "3"}, 3},
		{"web-2", "web", map[string]string{PodIndexLabel: "x"}, 2}, // a bad label falls through to the name
		{"web-2", "web", nil, 2},
		{"my-db-7", "my-db", nil, 7},
		{"my-db-7", "db", nil, -1}, // not this StatefulSet's naming
		{"web-2", "", nil, -1},     // not a StatefulSet's pod: the name says nothing
		{"web-02", "web", nil, -1},
		{"web-", "web", nil, -1},
	} {
		if got := Of(tt.name, tt.labels, tt.sts); got != tt.want {
			t.Errorf("Of(%q, %v, %q) = %d, want %d", tt.name, tt.labels, tt.sts, got, tt.want)
		}
	}
}
