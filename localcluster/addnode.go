package localcluster

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// AddRealNode adds a real node to the running cluster in o.StateDir, made
// exactly like those Up starts: the lowest free index (real-3 beside
// real-0..2) with its bridge, pod /24, zone, labels and taint, its own
// kubelet credentials from the cluster's CA, mount namespace, containerd
// with the images of the dir the cluster was started with (o.ImagesDir for
// a cluster that did not record it), and kubelet. The volume provisioner is
// restarted to serve it too. The node is recorded in the cluster's state,
// so Load, FaultNode and Down handle it like the others; it stays until the
// cluster stops. AddRealNode returns once the node is Ready; on failure it
// removes what it set up. It holds up.lock throughout (as Up and FaultNode
// do) and needs root and a cluster started with real nodes. o.CacheRoot
// names the binaries as for Up; o.Timeout (default 2m), o.Log and
// o.Progress apply; the other fields are unused.
func AddRealNode(ctx context.Context, o Options) (_ *RealNode, err error) {
	o.defaults()
	if _, err := os.Stat(o.StateDir); err != nil {
		return nil, fmt.Errorf("add a real node: %w (%w)", ErrNotRunning, err)
	}
	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	unlock, err := lockFile(ctx, filepath.Join(o.StateDir, "up.lock"), syscall.LOCK_EX)
	if err != nil {
		return nil, err
	}
	defer unlock()
	s, err := Load(o.StateDir)
	if err != nil {
		return nil, fmt.Errorf("add a real node: %w", err)
	}
	if len(s.RealNodes) == 0 {
		return nil, fmt.Errorf("add a real node: the cluster in %s runs without real nodes (%s); start it with them first", s.StateDir, s.RealNodeSkipped)
	}
	i, err := nextRealNodeIndex(s.RealNodes)
	if err != nil {
		return nil, fmt.Errorf("add a real node: %w", err)
	}
	if s.ImagesDir != "" {
		o.ImagesDir = s.ImagesDir
	}
	o.RealNodes = len(s.RealNodes) + 1
	if why := nodesUnavailable(o); why != "" {
		return nil, fmt.Errorf("add a real node: %s", why)
	}
	bins, err := Binaries(o.CacheRoot)
	if err != nil {
		return nil, err
	}
	cs, err := s.client()
	if err != nil {
		return nil, err
	}
	n := newRealNode(s.StateDir, i)
	fmt.Fprintf(o.Progress, "adding real node %s to the local cluster in %s\n", n.Name, s.StateDir)
	step := stepper(o.Progress)
	if err := s.prepareNode(ctx, n); err != nil {
		return nil, err
	}
	s.RealNodes = append(s.RealNodes, n)
	defer func() {
		if err != nil {
			o.Log.Warn("removing the real node that failed to start", "node", n.Name, "err", err)
			s.removeNode(n, o)
			err = fmt.Errorf("add real node %s: %w", n.Name, err)
		}
	}()
	if err := startRealNodes(ctx, s, []*RealNode{n}, o.ImagesDir, bins["kubelet"], s.starter(o.Log)); err != nil {
		return nil, err
	}
	step(n.Name + ": containerd, images, kubelet")
	if err := waitRealNodesReady(ctx, s, cs, []*RealNode{n}); err != nil {
		return nil, err
	}
	if err := s.serveVolumes(n); err != nil {
		return nil, err
	}
	if err := s.save(); err != nil {
		return nil, err
	}
	step(n.Name + " ready")
	return n, nil
}

// prepareNode makes n's directory and bridge, starting from a clean
// directory; the machine's real nodes must be this cluster's.
func (s *State) prepareNode(ctx context.Context, n *RealNode) error {
	unlock, err := lockNodes(ctx)
	if err != nil {
		return err
	}
	defer unlock()
	b, _ := os.ReadFile(ownerFile)
	if owner := strings.TrimSpace(string(b)); owner != s.StateDir {
		return fmt.Errorf("add %s: the machine's real nodes are not this cluster's (%s names %q)", n.Name, ownerFile, owner)
	}
	// No leftovers of an earlier node of this name: its image stamp would
	// skip the import into the new containerd.
	if err := os.RemoveAll(n.Dir); err != nil {
		return fmt.Errorf("clean real node dir: %w", err)
	}
	if err := n.prepare(ctx); err != nil {
		cleanupNode(ctx, n.Dir) // a bridge made before the failure
		return fmt.Errorf("prepare %s: %w", n.Name, err)
	}
	return nil
}

// removeNode undoes a failed AddRealNode of n: everything of it on this
// machine, its records in s and its Node object. Best effort.
func (s *State) removeNode(n *RealNode, o Options) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if unlock, err := lockNodes(ctx); err == nil {
		cleanupNode(ctx, n.Dir)
		unlock()
	}
	if err := os.RemoveAll(n.Dir); err != nil {
		o.Log.Warn("remove real node dir", "node", n.Name, "err", err)
	}
	s.Procs = slices.DeleteFunc(s.Procs, func(p Proc) bool { return strings.HasPrefix(p.Name, n.Name+"-") })
	s.RealNodes = slices.DeleteFunc(s.RealNodes, func(m *RealNode) bool { return m == n })
	if err := s.save(); err != nil {
		o.Log.Warn("save cluster state", "err", err)
	}
	if cs, err := s.client(); err == nil {
		if err := cs.CoreV1().Nodes().Delete(ctx, n.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			o.Log.Warn("delete Node", "node", n.Name, "err", err)
		}
	}
}
