package main

import (
	"os"
	"testing"
)

func TestCPUSplit(t *testing.T) {
	a := cpuSample{containers: 100, procs: map[int]procCPU{
		10: {start: 7, category: "API server", own: 20},
		11: {start: 8, category: "shims and runc", own: 1},
		12: {start: 9, category: "kubelets", own: 4}, // ends during the run
	}}
	b := cpuSample{containers: 130, procs: map[int]procCPU{
		10: {start: 7, category: "API server", own: 26},
		11: {start: 9, category: "kubelets", own: 3}, // pid reused: all of it counts
		13: {start: 10, category: "harness (this campaign)", own: 2},
	}}
	got := map[string]CPUShare{}
	for _, s := range cpuSplit(a, b, 60, 4) {
		got[s.Part] = s
	}
	for part, want := range map[string]float64{
		"containers (applications, probes, exec'd commands)": 30,
		"API server":              6,
		"kubelets":                3,
		"harness (this campaign)": 2,
		exited:                    19,
	} {
		if got[part].CoreSeconds != want {
			t.Errorf("%s: %v core-s; want %v", part, got[part].CoreSeconds, want)
		}
	}
	if _, ok := got["shims and runc"]; ok {
		t.Errorf("a part with no process at the end: %+v", got["shims and runc"])
	}
	if got["containers (applications, probes, exec'd commands)"].CoreSecondsPerRound != 7.5 {
		t.Errorf("per round %+v; want 7.5", got["containers (applications, probes, exec'd commands)"])
	}
	if s := cpuSplit(a, b, 60, 4); s[0].CoreSeconds < s[len(s)-1].CoreSeconds {
		t.Errorf("not largest first: %+v", s)
	}
}

func TestCPUCategory(t *testing.T) {
	self := os.Getpid()
	for _, tc := range []struct {
		comm string
		pid  int
		want string
	}{
		{"kube-apiserver", 100, "API server"},
		{"kube-controller", 101, "controller-manager, scheduler"},
		{"containerd-shim", 102, "shims and runc"},
		{"containerd", 103, "containerd"},
		{"bash", self, "harness (this campaign)"},
		{"sshd", 104, "other"},
	} {
		if got := cpuCategory(tc.comm, tc.pid, self); got != tc.want {
			t.Errorf("cpuCategory(%q, %d) = %q; want %q", tc.comm, tc.pid, got, tc.want)
		}
	}
}

// TestSampleCPU reads this machine: the test binary is a process outside
// any container, categorized as the harness.
func TestSampleCPU(t *testing.T) {
	s := sampleCPU()
	me, ok := s.procs[os.Getpid()]
	if !ok || me.category != "harness (this campaign)" || me.own < 0 {
		t.Fatalf("own process %+v (found %v); want the harness", me, ok)
	}
}
