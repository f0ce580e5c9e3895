package controller_test

import (
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/flockd/flock/internal/version"
)

// TestBuildInfoMetric: a manager registers flock_build_info (1, with the
// build's labels) on controller-runtime's registry, which /metrics serves.
func TestBuildInfoMetric(t *testing.T) {
	e := newEnv(t, 0)
	e.startManager()
	mfs, err := metrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	v := version.Get()
	want := map[string]string{"version": v.Version, "commit": v.Commit, "goversion": v.GoVersion}
	for _, mf := range mfs {
		if mf.GetName() != "flock_build_info" {
			continue
		}
		if len(mf.GetMetric()) != 1 || mf.GetMetric()[0].GetGauge().GetValue() != 1 {
			t.Fatalf("flock_build_info = %v, want one series of value 1", mf.GetMetric())
		}
		got := map[string]string{}
		for _, l := range mf.GetMetric()[0].GetLabel() {
			got[l.GetName()] = l.GetValue()
		}
		for k, w := range want {
			if got[k] != w {
				t.Errorf("flock_build_info label %s = %q, want %q", k, got[k], w)
			}
		}
		return
	}
	t.Fatal("flock_build_info not registered")
}
