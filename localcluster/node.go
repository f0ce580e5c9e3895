package localcluster

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// The real nodes: real-0, real-1, ... on this machine, beside the simulated
// ones. Each is a kubelet with its own containerd (root, state, socket), its
// own bridge and pod /24, its own kubelet, pod-log and CNI directories, and
// its own mount namespace, in which the node-local directories (NodeLocalDir,
// NodeVolumesDir) are that node's alone and SharedDir is the same for all.
// The nodes share this machine's network namespace: one kube-proxy serves
// them all, and routing between their bridges is this machine's.
const (
	// RealNodeLabel is the label (value "true") and NoSchedule taint key of
	// the real nodes: only pods that select and tolerate it land there.
	RealNodeLabel = "node.flockd.io/real"
	// ControlPlaneIP is where pods reach the control plane: real-0's
	// bridge address, which stays up while real-0 is stopped or killed.
	ControlPlaneIP = "10.245.0.1"
	// DNSServiceIP is the kube-dns Service (CoreDNS), the kubelets' clusterDNS.
	DNSServiceIP = "10.96.0.10"
	// PauseImage is the real nodes' sandbox image (cmd/pause), present on
	// every real node: a container that only has to exist can run it.
	PauseImage = "ghcr.io/flockd/pause:dev"
	// DefaultRealNodes is how many real nodes flock-cluster and the test
	// bed start as root.
	DefaultRealNodes = 3

	// NodeLocalDir is node-local: the same path on every real node, a
	// different directory on each (hostPath volumes, flock-controller's
	// node-pinned storage).
	NodeLocalDir = "/var/lib/flock"
	// NodeVolumesDir is where the default StorageClass's volumes live, also
	// node-local.
	NodeVolumesDir = "/var/lib/flock-volumes"
	// SharedDir is one directory seen by every real node, as an NFS mount
	// would be (one shared hosts file for a whole job).
	SharedDir = "/var/lib/flock-shared"

	maxRealNodes = 16
	// realNodesCIDR holds every real node's pod /24: 10.245.<i>.0/24.
	realNodesCIDR = "10.245.0.0/16"
	bridgePrefix  = "flock" // bridges flock0, flock1, ...
	zoneLabel     = "topology.kubernetes.io/zone"
)

// RealNodesFromEnv is how many real nodes the environment asks for:
// $FLOCK_REAL_NODES, else DefaultRealNodes; FLOCK_REAL_NODE=0 (the
// single-node spelling) turns them off too.
func RealNodesFromEnv() int {
	switch os.Getenv("FLOCK_REAL_NODE") {
	case "0", "off", "false":
		return 0
	}
	if v := os.Getenv("FLOCK_REAL_NODES"); v != "" {
		if n, err := strconv.Atoi(v); err == nil && n >= 0 {
			return n
		}
	}
	return DefaultRealNodes
}

// RealNode describes one real node.
type RealNode struct {
	Name    string `json:"name"`
	IP      string `json:"ip"`
	Zone    string `json:"zone"`
	Bridge  string `json:"bridge"`
	PodCIDR string `json:"podCIDR"`
	// Dir holds the node's kubelet and containerd roots, configs and the
	// directories behind its node-local paths (see HostPath).
	Dir string `json:"dir"`
	// RunDir holds its containerd socket and state.
	RunDir     string `json:"runDir"`
	Containerd string `json:"containerd"` // containerd socket path
	// MountNS is the file its mount namespace is bound to; its kubelet,
	// containerd and containers run there.
	MountNS string `json:"mountNS"`
	// Shared is the directory on this machine behind SharedDir.
	Shared string `json:"shared"`
	// Down is set while the node is down on purpose: "stopped" (its
	// kubelet) or "killed" (everything of it).
	Down string `json:"down,omitempty"`
}

func newRealNode(stateDir string, i int) *RealNode {
	name := fmt.Sprintf("real-%d", i)
	run := filepath.Join(nodeRunDir, name)
	return &RealNode{
		Name: name, IP: fmt.Sprintf("10.245.%d.1", i), Zone: fmt.Sprintf("zone-real-%d", i),
		Bridge: fmt.Sprintf("%s%d", bridgePrefix, i), PodCIDR: fmt.Sprintf("10.245.%d.0/24", i),
		Dir:    filepath.Join(stateDir, "nodes", name),
		RunDir: run, Containerd: filepath.Join(run, "containerd.sock"),
		MountNS: filepath.Join(nodeRunDir, "ns", name),
		Shared:  filepath.Join(stateDir, "nodes", "shared"),
	}
}

// nextRealNodeIndex is the lowest index i for which the cluster has no
// real-i, within maxRealNodes (the /24s of realNodesCIDR it plans for).
func nextRealNodeIndex(nodes []*RealNode) (int, error) {
	for i := range maxRealNodes {
		name := fmt.Sprintf("real-%d", i)
		if !slices.ContainsFunc(nodes, func(n *RealNode) bool { return n.Name == name }) {
			return i, nil
		}
	}
	return 0, fmt.Errorf("the cluster has %d real nodes, the most the address plan fits (10.245.<i>.0/24, i < %d)", len(nodes), maxRealNodes)
}

func (n *RealNode) save() error { return writeJSON(filepath.Join(n.Dir, "node.json"), n) }

// prepare makes the node's directory, its record there (node.json, which
// cleanupNode reads) and its bridge with the node's address. The caller
// holds lockNodes.
func (n *RealNode) prepare(ctx context.Context) error {
	if err := os.MkdirAll(n.Dir, 0o755); err != nil {
		return fmt.Errorf("create real node dir: %w", err)
	}
	if err := n.save(); err != nil {
		return err
	}
	for _, c := range [][]string{
		{"ip", "link", "add", n.Bridge, "type", "bridge"},
		{"ip", "addr", "add", n.IP + "/24", "dev", n.Bridge},
		{"ip", "link", "set", n.Bridge, "up"},
	} {
		if err := run(ctx, c...); err != nil {
			return err
		}
	}
	return nil
}

// kubeconfig is the node's kubelet kubeconfig (see writeNodePKI).
func (n *RealNode) kubeconfig(stateDir string) string {
	return filepath.Join(stateDir, "config", "kubelet-"+n.Name+".kubeconfig")
}

// bind is a directory of this machine mounted at a path of the node.
type bind struct{ src, dst string }

func (n *RealNode) binds() []bind {
	return []bind{
		{filepath.Join(n.Dir, "local"), NodeLocalDir},
		{filepath.Join(n.Dir, "volumes"), NodeVolumesDir},
		{n.Shared, SharedDir},
	}
}

// HostPath is where path, as the node's pods and kubelet see it, is on this
// machine: below n.Dir for the node-local directories, the shared directory
// for SharedDir, path itself otherwise.
func (n *RealNode) HostPath(path string) string {
	path = filepath.Clean(path)
	for _, b := range n.binds() {
		if rel, err := filepath.Rel(b.dst, path); err == nil && rel != ".." && !strings.HasPrefix(rel, "../") {
			return filepath.Join(b.src, rel)
		}
	}
	return path
}

// makeMountNS makes the node's mount namespace: this machine's mounts (and
// later changes to them) with the node-local directories bound over.
func (n *RealNode) makeMountNS(ctx context.Context) error {
	dir := filepath.Dir(n.MountNS)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("create %s: %w", dir, err)
	}
	// A namespace can be bound only to a file on a private mount.
	if len(mountsMatching(func(p string) bool { return p == dir })) == 0 {
		if err := run(ctx, "mount", "--bind", dir, dir); err != nil {
			return err
		}
	}
	if err := run(ctx, "mount", "--make-private", dir); err != nil {
		return err
	}
	if err := os.WriteFile(n.MountNS, nil, 0o644); err != nil {
		return fmt.Errorf("mount namespace file: %w", err)
	}
	if err := run(ctx, "unshare", "--mount="+n.MountNS, "--propagation=slave", "true"); err != nil {
		return fmt.Errorf("mount namespace of %s: %w", n.Name, err)
	}
	for _, b := range n.binds() {
		for _, d := range []string{b.src, b.dst} { // dst: the mount point, on this machine too
			if err := os.MkdirAll(d, 0o755); err != nil {
				return fmt.Errorf("node dir: %w", err)
			}
		}
		if err := run(ctx, "nsenter", "--mount="+n.MountNS, "mount", "--bind", b.src, b.dst); err != nil {
			return fmt.Errorf("node-local %s of %s: %w", b.dst, n.Name, err)
		}
	}
	return nil
}

// kill SIGKILLs every process of the node (its kubelet, containerd, shims
// and their containers) at once and drops its mount namespace, as a power
// loss would. Its directories stay on disk.
func (n *RealNode) kill() {
	if fi, err := os.Stat(n.MountNS); err == nil {
		if st, ok := fi.Sys().(*syscall.Stat_t); ok {
			ns := fmt.Sprintf("mnt:[%d]", st.Ino)
			pids := pidsInMountNS(ns)
			for _, pid := range pids {
				killTree(pid)
			}
			for i := 0; i < 100 && len(pidsInMountNS(ns)) > 0; i++ {
				time.Sleep(50 * time.Millisecond)
			}
		}
	}
	_ = syscall.Unmount(n.MountNS, syscall.MNT_DETACH)
	_ = os.Remove(n.MountNS)
}

// procName is the name of a node's component in State.Procs and logs/.
func (n *RealNode) procName(component string) string { return n.Name + "-" + component }
