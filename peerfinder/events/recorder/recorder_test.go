package recorder

import (
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/flockd/flock/peerfinder/events"
)

var _ events.Emitter = (*Recorder)(nil)

// The leaf package's types are the API's, which it does not import.
func TestEventTypesAreTheAPIs(t *testing.T) {
	if events.Normal != corev1.EventTypeNormal || events.Warning != corev1.EventTypeWarning {
		t.Errorf("events.Normal, Warning = %q, %q; want %q, %q", events.Normal, events.Warning, corev1.EventTypeNormal, corev1.EventTypeWarning)
	}
}

// A nil Recorder (Events off) takes Events and stops without effect.
func TestNilRecorder(t *testing.T) {
	var r *Recorder
	r.Emit(events.SinkRecovered("hook"))
	r.Stop()
}
