package peer

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
