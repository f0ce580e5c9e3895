package main

import (
	"cmp"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/procfs"
)

// Where a round's core-seconds go (issue 33 #6): the machine's busy time
// split into the containers (one cgroup holds every container of the real
// nodes: the applications, their probes and the processes execs start)
// and the processes outside them, by what they are: those alive at the
// end from /proc, those that ended during the run (each runc a shim
// starts, the shims of removed containers, components restarted by faults)
// from process accounting (acct.go). A parent's reaped-children time
// cannot stand in for the latter: a shim reaps its containers' processes
// too, which the containers' cgroup already counts.

// containersCgroup is containerd's cgroup parent on the real nodes.
var containersCgroup = []string{
	"/sys/fs/cgroup/cpuacct/k8s.io/cpuacct.usage", // v1: nanoseconds
	"/sys/fs/cgroup/k8s.io/cpu.stat",              // v2: usage_usec
}

// cpuCategory names the part of the bed a process outside the containers
// belongs to, by its command name (at most 15 characters).
func cpuCategory(comm string, pid, self int) string {
	switch {
	case pid == self:
		return "harness (this campaign)"
	case comm == "kube-apiserver":
		return "API server"
	case comm == "etcd":
		return "cluster etcd"
	case strings.HasPrefix(comm, "kube-controller"), comm == "kube-scheduler":
		return "controller-manager, scheduler"
	case comm == "kubelet":
		return "kubelets"
	case comm == "containerd":
		return "containerd"
	case strings.HasPrefix(comm, "containerd-shim"), comm == "runc":
		return "shims and runc"
	case comm == "coredns":
		return "CoreDNS"
	case comm == "bridge", comm == "host-local", comm == "loopback", comm == "portmap":
		return "CNI plugins"
	case comm == "kwok":
		return "kwok"
	}
	return "other"
}

// cpuSample is one reading: the containers' seconds and each process's.
type cpuSample struct {
	at         time.Time
	containers float64
	procs      map[int]procCPU
}

type procCPU struct {
	start    uint64 // start time, so a reused pid is a new process
	category string
	own      float64 // utime + stime
}

// sampleCPU reads the containers' cgroup and every process outside it;
// what cannot be read counts as zero.
func sampleCPU() cpuSample {
	s := cpuSample{at: time.Now(), procs: map[int]procCPU{}}
	s.containers = containersSeconds()
	fs, err := procfs.NewDefaultFS()
	if err != nil {
		return s
	}
	procs, err := fs.AllProcs()
	if err != nil {
		return s
	}
	self := os.Getpid()
	for _, p := range procs {
		if inContainer(p) {
			continue
		}
		st, err := p.Stat()
		if err != nil {
			continue
		}
		const userHZ = 100
		s.procs[p.PID] = procCPU{start: st.Starttime, category: cpuCategory(st.Comm, p.PID, self),
			own: float64(st.UTime+st.STime) / userHZ}
	}
	return s
}

func inContainer(p procfs.Proc) bool {
	cgs, err := p.Cgroups()
	if err != nil {
		return false
	}
	for _, cg := range cgs {
		if strings.HasPrefix(cg.Path, "/k8s.io/") {
			return true
		}
	}
	return false
}

func containersSeconds() float64 {
	for _, path := range containersCgroup {
		b, err := os.ReadFile(path)
		if err != nil {
			continue
		}
		if v, ok := strings.CutPrefix(string(b), "usage_usec "); ok {
			line, _, _ := strings.Cut(v, "\n")
			us, _ := strconv.ParseFloat(line, 64)
			return us / 1e6
		}
		ns, _ := strconv.ParseFloat(strings.TrimSpace(string(b)), 64)
		return ns / 1e9
	}
	return 0
}

// CPUShare is one part of the machine's busy time over a run.
type CPUShare struct {
	Part string `json:"part"`
	// CoreSeconds over the run, and per judged subject round.
	CoreSeconds         float64 `json:"coreSeconds"`
	CoreSecondsPerRound float64 `json:"coreSecondsPerRound"`
}

// The busy time no process explains: without process accounting, all that
// ended; with it, what ended unnamed (runc's setup stages, mount, the
// machine's other work) and interrupts.
const (
	exited      = "ended during the run (runc, removed containers' shims, restarted components), interrupts"
	exitedOther = "other processes that ended during the run, interrupts"
)

// cpuSplit returns the busy time between a and b by part, largest first.
// A process only in b (or whose pid was reused) counts from its start; one
// only in a counts from a to its end if it is among ended (nil: no process
// accounting), where a process in no part of the bed is left out, since
// outside the containers it is nothing named and inside them the cgroup
// counted it.
func cpuSplit(a, b cpuSample, ended []endedProc, busy float64, rounds int) []CPUShare {
	by := map[string]float64{"containers (applications, probes, exec'd commands)": b.containers - a.containers}
	for pid, q := range b.procs {
		p, ok := a.procs[pid]
		if !ok || p.start != q.start {
			p = procCPU{}
		}
		by[q.category] += q.own - p.own
	}
	for _, e := range ended {
		part := cpuCategory(e.comm, -1, 0)
		if part == "other" {
			continue
		}
		cpu := e.cpu
		if p, ok := a.procs[e.pid]; ok && e.begin <= a.at.Unix() {
			cpu -= p.own
		}
		by[part] += cpu
	}
	sum := 0.0
	for _, v := range by {
		sum += v
	}
	rest := exited
	if ended != nil {
		rest = exitedOther
	}
	by[rest] = busy - sum
	var out []CPUShare
	for part, v := range by {
		out = append(out, CPUShare{Part: part, CoreSeconds: round1(v), CoreSecondsPerRound: round1(v / float64(max(rounds, 1)))})
	}
	slices.SortFunc(out, func(x, y CPUShare) int { return cmp.Compare(y.CoreSeconds, x.CoreSeconds) })
	return out
}

// printCPUSplit prints the split as a table.
func printCPUSplit(shares []CPUShare, busy float64) {
	fmt.Printf("%-88s %8s %10s %6s\n", "where the machine's CPU went", "core-s", "per round", "share")
	for _, s := range shares {
		fmt.Printf("%-88s %8.1f %10.1f %5.0f%%\n", s.Part, s.CoreSeconds, s.CoreSecondsPerRound, 100*s.CoreSeconds/max(busy, 1e-9))
	}
}
