package localcluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"
)

// NodeFault is what "flock-cluster node" does to a real node.
type NodeFault string

const (
	// NodeStop stops the node's kubelet: its containers keep running, the
	// node goes NotReady (a partition, or a kubelet crash).
	NodeStop NodeFault = "stop"
	// NodeKill SIGKILLs the node's kubelet, containerd, shims and
	// containers at once and drops its mount namespace (a power loss);
	// its directories stay on disk.
	NodeKill NodeFault = "kill"
	// NodeStart brings a stopped or killed node back with its data.
	NodeStart NodeFault = "start"
)

// ErrNoSuchNode means the cluster has no real node of that name.
var ErrNoSuchNode = errors.New("no such real node")

// FaultNode does fault to the real node name of the cluster in stateDir. It
// returns once the fault is done; after NodeStart, once the node's kubelet
// and containerd run again (the node turns Ready within seconds; wait for it
// through the API).
func FaultNode(ctx context.Context, stateDir, name string, fault NodeFault) error {
	unlock, err := lockFile(ctx, filepath.Join(stateDir, "up.lock"), syscall.LOCK_EX)
	if err != nil {
		return err
	}
	defer unlock()
	s, err := Load(stateDir)
	if s == nil {
		return err
	}
	if err != nil {
		return fmt.Errorf("%s the node: %w", fault, err)
	}
	i := slices.IndexFunc(s.RealNodes, func(n *RealNode) bool { return n.Name == name })
	if i < 0 {
		names := []string{}
		for _, n := range s.RealNodes {
			names = append(names, n.Name)
		}
		return fmt.Errorf("%w %q (the cluster has [%s])", ErrNoSuchNode, name, strings.Join(names, " "))
	}
	n := s.RealNodes[i]
	switch fault {
	case NodeStop:
		if n.Down != "" {
			return fmt.Errorf("node %s is already %s", name, n.Down)
		}
		p := s.proc(n.procName("kubelet"))
		if err := p.stop(10 * time.Second); err != nil {
			return fmt.Errorf("stop %s: %w", name, err)
		}
		p.Down = true
		n.Down = "stopped"
	case NodeKill:
		if n.Down == "killed" {
			return fmt.Errorf("node %s is already killed", name)
		}
		n.kill()
		for _, c := range []string{"kubelet", "containerd"} {
			s.proc(n.procName(c)).Down = true
		}
		n.Down = "killed"
	case NodeStart:
		if err := s.startNode(ctx, n); err != nil {
			return fmt.Errorf("start %s: %w", name, err)
		}
		n.Down = ""
	default:
		return fmt.Errorf("unknown node fault %q (stop, kill or start)", fault)
	}
	return s.save()
}

// startNode starts what a stop or kill took down, with the arguments of its
// first start.
func (s *State) startNode(ctx context.Context, n *RealNode) error {
	switch n.Down {
	case "":
		return fmt.Errorf("node %s is not down", n.Name)
	case "killed":
		if err := n.makeMountNS(ctx); err != nil {
			return err
		}
		if err := s.restartProc(n.procName("containerd")); err != nil {
			return err
		}
		if err := n.waitContainerd(ctx, s); err != nil {
			return err
		}
	}
	return s.restartProc(n.procName("kubelet"))
}

// proc is the recorded process called name; it panics if there is none,
// which is a bug of the caller (node component names are fixed).
func (s *State) proc(name string) *Proc {
	i := slices.IndexFunc(s.Procs, func(p Proc) bool { return p.Name == name })
	if i < 0 {
		panic("no component " + name)
	}
	return &s.Procs[i]
}

// restartProc starts a stopped component again with the same arguments,
// its output appended to its log after a line that says so (up to
// maxKeptLog): a fault's post-mortem needs the log from before the restart.
func (s *State) restartProc(name string) error {
	p := s.proc(name)
	logPath := filepath.Join(s.StateDir, "logs", p.Name+".log")
	if fi, err := os.Stat(logPath); err == nil && fi.Size() > maxKeptLog {
		_ = os.Rename(logPath, logPath+".prev")
	}
	marker := fmt.Sprintf("==== %s started again at %s ====\n", p.Name, time.Now().UTC().Format(time.RFC3339Nano))
	np, err := startLogged(s.StateDir, p.Name, p.Args[0], p.Args[1:], logPath, marker)
	if err != nil {
		return err
	}
	*p = np
	return nil
}
