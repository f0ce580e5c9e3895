package config

import (
	"errors"
	"slices"
	"syscall"
	"testing"

	"github.com/flockd/flock/internal/atomicfile"
	"github.com/flockd/flock/peerfinder/sink/hostsfile"
	"github.com/flockd/flock/peerfinder/sink/jobfile"
)

func TestParseSinkFlags(t *testing.T) {
	e := env(map[string]string{"POD_NAMESPACE": "ns1", "POD_NAME": "train-ps-0-x7k2p"}, kubeletResolv)
	for _, tc := range []struct {
		name  string
		args  []string
		check func(t *testing.T, c *Config)
	}{
		{
			name: "init container writing a hosts file",
			args: []string{"-service=jobs", "-hosts-file=/etc/hosts", "-hosts-name-template={{.Role}}-{{.Index}}", "-hosts-expect=ps=1,worker=3", "-wait-for-all", "-once", "-ip-family=ipv4"},
			check: func(t *testing.T, c *Config) {
				s := c.Sinks
				if s.HostsFile != "/etc/hosts" || s.HostsID != "jobs" || !s.WaitForAll || s.IPFamily != hostsfile.IPv4 || !c.InitMode() {
					t.Errorf("sinks = %+v, init %v", s, c.InitMode())
				}
				if want := []string{"ps-0", "worker-0", "worker-1", "worker-2"}; !slices.Equal(s.Expected, want) {
					t.Errorf("expected = %q, want %q", s.Expected, want)
				}
			},
		},
		{
			name: "expected names from -expect and the host name",
			args: []string{"-service=web", "-hosts-file=h", "-expect=3", "-hosts-write-mode=in-place", "-hosts-lease=web-hosts"},
			check: func(t *testing.T, c *Config) {
				if want := []string{"web-0", "web-1", "web-2"}; !slices.Equal(c.Sinks.Expected, want) {
					t.Errorf("expected = %q, want %q", c.Sinks.Expected, want)
				}
				if c.Sinks.WriteMode != atomicfile.InPlace || c.Sinks.HostsLease != "web-hosts" || c.InitMode() {
					t.Errorf("sinks = %+v", c.Sinks)
				}
			},
		},
		{
			name: "expected names from the pod's Jobs",
			args: []string{"-service=train", "-source=pods", "-selector=app=train", "-hosts-file=/etc/hosts", "-hosts-expect=auto", "-hosts-job-label=flockd.io/job", "-wait-for-all", "-once"},
			check: func(t *testing.T, c *Config) {
				s := c.Sinks
				if !s.ExpectAuto || s.JobLabel != "flockd.io/job" || s.Expected != nil || !s.WaitForAll {
					t.Errorf("sinks = %+v", s)
				}
			},
		},
		{
			name: "torch rendezvous from the pod's Job (-hosts-expect=auto)",
			args: []string{"-service=torch", "-source=pods", "-selector=app=torch", "-hosts-file=/flock/hosts", "-hosts-expect=auto",
				"-rendezvous=torch", "-rendezvous-file=/flock/rendezvous", "-wait-for-all", "-once"},
			check: func(t *testing.T, c *Config) {
				s := c.Sinks
				if !s.ExpectAuto || s.Expected != nil || s.Rendezvous != jobfile.Torch || s.RendezvousFile != "/flock/rendezvous" {
					t.Errorf("sinks = %+v", s)
				}
			},
		},
		{
			name: "pid 1 wrapper",
			args: []string{"-service=web", "-on-start=/bin/true", "-json-file=/run/peers.json", "-reload-signal=SIGHUP", "--", "nginx", "-g", "daemon off;"},
			check: func(t *testing.T, c *Config) {
				if !slices.Equal(c.Sinks.Exec, []string{"nginx", "-g", "daemon off;"}) || c.Sinks.ReloadSignal != syscall.SIGHUP || c.InitMode() {
					t.Errorf("exec = %q, reload %v, init %v", c.Sinks.Exec, c.Sinks.ReloadSignal, c.InitMode())
				}
				if c.Sinks.JSONFile != "/run/peers.json" {
					t.Errorf("json file = %q", c.Sinks.JSONFile)
				}
			},
		},
		{
			name: "MPI hostfile and TF rendezvous from the pods source",
			args: []string{"-service=train", "-source=pods", "-selector=job=train", "-hosts-name-template={{.Role}}-{{.Index}}", "-hosts-expect=chief=1,worker=2",
				"-mpi-hostfile=/run/hostfile", "-mpi-slots=auto", "-mpi-roles=worker", "-rendezvous=tf", "-rendezvous-file=/run/env", "--", "python3", "train.py"},
			check: func(t *testing.T, c *Config) {
				s := c.Sinks
				if s.MPIHostfile != "/run/hostfile" || !s.MPISlots.Auto || !slices.Equal(s.MPIRoles, []string{"worker"}) {
					t.Errorf("mpi = %q %v %q", s.MPIHostfile, s.MPISlots, s.MPIRoles)
				}
				if s.Rendezvous != jobfile.TF || s.RendezvousPort != 2222 || s.RendezvousFile != "/run/env" || !s.Any() {
					t.Errorf("rendezvous = %q %d %q", s.Rendezvous, s.RendezvousPort, s.RendezvousFile)
				}
			},
		},
		{
			name: "torch rendezvous for the command only, -expect N",
			args: []string{"-service=train", "-hostname=train-1", "-expect=3", "-rendezvous=torch", "-rendezvous-roles=train", "--", "torchrun"},
			check: func(t *testing.T, c *Config) {
				s := c.Sinks
				if s.Rendezvous != jobfile.Torch || s.RendezvousPort != 29500 || !slices.Equal(s.Expected, []string{"train-0", "train-1", "train-2"}) {
					t.Errorf("rendezvous = %q %d, expected %q", s.Rendezvous, s.RendezvousPort, s.Expected)
				}
				if s.MPISlots != (jobfile.Slots{N: 1}) {
					t.Errorf("default -mpi-slots = %v, want 1", s.MPISlots)
				}
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Parse(tc.args, e)
			if err != nil {
				t.Fatal(err)
			}
			tc.check(t, c)
		})
	}
}

func TestParseSinkUsageErrors(t *testing.T) {
	e := env(map[string]string{"POD_NAMESPACE": "ns1", "POD_NAME": "train-ps-0-x7k2p"}, kubeletResolv)
	for _, tc := range []struct {
		args []string
		flag string
	}{
		{[]string{"-service=web", "-hosts-file=h", "-wait-for-all"}, "wait-for-all"},
		{[]string{"-service=web", "-json-file=j", "-wait-for-all", "-hosts-expect=a"}, "wait-for-all"},
		{[]string{"-service=web", "-json-file=j", "-hosts-lease=x"}, "hosts-lease"},
		{[]string{"-service=web", "-hosts-file=h", "-hosts-lease=Bad_Name"}, "hosts-lease"},
		{[]string{"-service=web", "-hosts-file=h", "-hosts-name-template={{.Role"}, "hosts-name-template"},
		{[]string{"-service=web", "-hosts-file=h", "-hosts-name-template={{.Nope}}"}, "hosts-name-template"},
		{[]string{"-service=web", "-hosts-file=h", "-hosts-alias-template={{range .Labels}}x{{end}}"}, "hosts-alias-template"},
		{[]string{"-service=web", "-hosts-file=h", "-hosts-expect=ps=x"}, "hosts-expect"},
		{[]string{"-service=web", "-hosts-file=h", "-hosts-expect=auto"}, "hosts-expect"},
		{[]string{"-service=train", "-source=pods", "-selector=app=a", "-json-file=j", "-hosts-expect=auto"}, "hosts-expect"},
		{[]string{"-service=train", "-source=pods", "-selector=app=a", "-hosts-file=h", "-hosts-expect=ps=1, auto"}, "hosts-expect"},
		{[]string{"-service=train", "-source=pods", "-selector=app=a", "-hosts-file=h", "-hosts-expect=ps=1", "-hosts-job-label=job"}, "hosts-job-label"},
		{[]string{"-service=train", "-source=pods", "-selector=app=a", "-hosts-file=h", "-hosts-expect=auto", "-hosts-job-label=bad key"}, "hosts-job-label"},
		{[]string{"-service=web", "-json-file=j", "-reload-signal=HUP"}, "reload-signal"},
		{[]string{"-service=web", "-reload-signal=SIGSTOP", "--", "x"}, "reload-signal"},
		{[]string{"-service=web", "-reload-signal=KILL", "--", "x"}, "reload-signal"},
		{[]string{"-service=web", "-reload-signal=9", "--", "x"}, "reload-signal"},
		{[]string{"-service=web", "-reload-signal=20", "--", "x"}, "reload-signal"},
		{[]string{"-service=web", "-once", "--", "sleep", "1"}, "once"},
		{[]string{"-service=web", "-json-file=j", "stray"}, ""},
		{[]string{"-service=web", "-hosts-file=/etc/hosts", "-json-file=/etc/hosts"}, "json-file"},
		{[]string{"-service=web", "-hosts-file=out/h", "-json-file=./out//x/../h"}, "json-file"},
		{[]string{"-service=web", "-mpi-hostfile=m", "-mpi-slots=auto"}, "mpi-slots"},
		{[]string{"-service=web", "-json-file=j", "-mpi-slots=2"}, "mpi-slots"},
		{[]string{"-service=web", "-json-file=j", "-mpi-roles=worker"}, "mpi-roles"},
		{[]string{"-service=web", "-hosts-file=h", "-mpi-hostfile=h"}, "mpi-hostfile"},
		{[]string{"-service=web", "-rendezvous=torch", "-rendezvous-file=r"}, "rendezvous"},
		{[]string{"-service=web", "-rendezvous=torch", "-hosts-expect=worker=2", "-json-file=j"}, "rendezvous"},
		{[]string{"-service=web", "-json-file=j", "-rendezvous-file=r"}, "rendezvous-file"},
		{[]string{"-service=web", "-json-file=j", "-rendezvous-port=1234"}, "rendezvous-port"},
		{[]string{"-service=web", "-json-file=j", "-rendezvous-roles=worker"}, "rendezvous-roles"},
		{[]string{"-service=web", "-rendezvous=tf", "-rendezvous-file=r", "-hosts-expect=worker=2", "-rendezvous-port=70000"}, "rendezvous-port"},
		{[]string{"-service=web", "-rendezvous=tf", "-rendezvous-file=r", "-hosts-expect=worker=2", "-json-file=r"}, "rendezvous-file"},
	} {
		_, err := Parse(tc.args, e)
		var ue *UsageError
		if !errors.As(err, &ue) || ue.Flag != tc.flag {
			t.Errorf("Parse(%q) = %v; want a usage error for -%s", tc.args, err, tc.flag)
		}
	}
	// auto reads this pod: $POD_NAME, since a Job pod's host name is not
	// its pod name.
	noPod := env(map[string]string{"POD_NAMESPACE": "ns1"}, kubeletResolv)
	_, err := Parse([]string{"-service=train", "-source=pods", "-selector=app=a", "-hosts-file=h", "-hosts-expect=auto"}, noPod)
	if ue := (*UsageError)(nil); !errors.As(err, &ue) || ue.Flag != "hosts-expect" {
		t.Errorf("-hosts-expect=auto without $POD_NAME: %v; want a usage error for -hosts-expect", err)
	}
	for _, args := range [][]string{
		{"-service=web", "-ip-family=ipx", "-hosts-file=h"},
		{"-service=web", "-hosts-write-mode=sideways", "-hosts-file=h"},
		{"-service=web", "-reload-signal=SIGNOPE", "--", "x"},
		{"-service=web", "-mpi-hostfile=m", "-mpi-slots=0"},
		{"-service=web", "-mpi-hostfile=m", "-mpi-slots=many"},
		{"-service=web", "-mpi-hostfile=m", "-mpi-roles=Worker"},
		{"-service=web", "-mpi-hostfile=m", "-mpi-roles=a,a"},
		{"-service=web", "-rendezvous=mxnet", "--", "x"},
	} {
		if _, err := Parse(args, e); err == nil {
			t.Errorf("Parse(%q) succeeded", args)
		}
	}
}
