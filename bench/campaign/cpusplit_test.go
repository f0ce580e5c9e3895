package main

import (
	"maps"
	"os"
	"testing"
	"time"
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
	for _, s := range cpuSplit(a, b, nil, 60, 4) {
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
	if s := cpuSplit(a, b, nil, 60, 4); s[0].CoreSeconds < s[len(s)-1].CoreSeconds {
		t.Errorf("not largest first: %+v", s)
	}
}

// TestCPUSplitEnded splits what ended by process accounting: a process
// alive at the start counts from then, one started during the run all of
// it, and one in no part of the bed (a container's, counted by the
// cgroup) not at all.
func TestCPUSplitEnded(t *testing.T) {
	at := time.Unix(5000, 0)
	a := cpuSample{at: at, containers: 100, procs: map[int]procCPU{
		10: {start: 7, category: "API server", own: 20}, // restarted: ends
	}}
	b := cpuSample{at: at.Add(time.Hour), containers: 110, procs: map[int]procCPU{
		11: {start: 9, category: "API server", own: 5}, // its successor
	}}
	ended := []endedProc{
		{comm: "kube-apiserver", pid: 10, begin: 4000, cpu: 28},
		{comm: "runc", pid: 12, begin: 5100, cpu: 0.5},
		{comm: "runc", pid: 10, begin: 5200, cpu: 0.5}, // pid 10 reused: all of it
		{comm: "portmap", pid: 13, begin: 5300, cpu: 2},
		{comm: "redis-cli", pid: 14, begin: 5400, cpu: 3}, // in a container
	}
	got := map[string]float64{}
	for _, s := range cpuSplit(a, b, ended, 40, 2) {
		got[s.Part] = s.CoreSeconds
	}
	want := map[string]float64{
		"containers (applications, probes, exec'd commands)": 10,
		"API server":     13,
		"shims and runc": 1,
		"CNI plugins":    2,
		exitedOther:      14,
	}
	if !maps.Equal(got, want) {
		t.Errorf("split %v; want %v", got, want)
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
