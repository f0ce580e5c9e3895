package localcluster

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// The machine's side of the real nodes: the Debian packages they run on, the
// claim that gives one cluster per machine its real nodes, the network they
// share (a bridge each, routed by this machine; one nftables table) and the
// cleanup that undoes all of it.

// nodeRunDir holds what must be short or machine-wide: sockets, containerd
// state, the mount namespaces, the owner record and its lock.
const nodeRunDir = "/run/flock-node"

// nodeTable is our nftables table (inet family).
const nodeTable = "flock_node"

// nodePackages are the Debian packages the real nodes run on, by a file each
// provides; Build installs the missing ones.
var nodePackages = []struct{ pkg, file string }{
	{"runc", "/usr/sbin/runc"},
	{"containerd", "/usr/bin/containerd"},
	{"containernetworking-plugins", "/usr/lib/cni/bridge"},
	{"nftables", "/usr/sbin/nft"},
	{"iptables", "/usr/sbin/iptables"},
	{"conntrack", "/usr/sbin/conntrack"},
	{"iproute2", "/usr/sbin/ip"},
	{"util-linux", "/usr/bin/nsenter"},
}

// InstallNodePackages installs the real nodes' Debian packages that are
// missing. Without root or apt-get it only reports what is missing.
func InstallNodePackages(ctx context.Context, progress io.Writer) error {
	var missing []string
	for _, p := range nodePackages {
		if _, err := os.Stat(p.file); err != nil {
			missing = append(missing, p.pkg)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	if os.Geteuid() != 0 {
		fmt.Fprintf(progress, "real nodes: need root to install %s; the cluster will run without them\n", strings.Join(missing, " "))
		return nil
	}
	if _, err := exec.LookPath("apt-get"); err != nil {
		fmt.Fprintf(progress, "real nodes: no apt-get to install %s; the cluster will run without them\n", strings.Join(missing, " "))
		return nil
	}
	fmt.Fprintf(progress, "installing the real nodes' packages: %s\n", strings.Join(missing, " "))
	install := func() error {
		args := append([]string{"install", "-y", "--no-install-recommends"}, missing...)
		cmd := exec.CommandContext(ctx, "apt-get", args...)
		cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
		cmd.Stdout, cmd.Stderr = progress, progress
		return cmd.Run()
	}
	if install() == nil {
		return nil
	}
	update := exec.CommandContext(ctx, "apt-get", "update")
	update.Stdout, update.Stderr = progress, progress
	if err := update.Run(); err != nil {
		return fmt.Errorf("apt-get update: %w", err)
	}
	if err := install(); err != nil {
		return fmt.Errorf("install %s: %w", strings.Join(missing, " "), err)
	}
	return nil
}

func nodePackageFile(pkg string) string {
	for _, p := range nodePackages {
		if p.pkg == pkg {
			return p.file
		}
	}
	panic("unknown node package " + pkg)
}

// nodesUnavailable says why this process cannot run real nodes, or "".
func nodesUnavailable(o Options) string {
	if o.RealNodes <= 0 {
		return "turned off (FLOCK_REAL_NODES=0 or -real-nodes=0)"
	}
	if o.RealNodes > maxRealNodes {
		return fmt.Sprintf("%d real nodes asked for, at most %d fit the address plan", o.RealNodes, maxRealNodes)
	}
	if os.Geteuid() != 0 {
		return "needs root"
	}
	for _, p := range nodePackages {
		if _, err := os.Stat(p.file); err != nil {
			return fmt.Sprintf("%s is missing (package %s; \"make cluster-build\" as root installs it)", p.file, p.pkg)
		}
	}
	if o.ImagesDir == "" {
		return "no images dir"
	}
	if _, err := os.Stat(filepath.Join(o.ImagesDir, "pause.tar")); err != nil {
		return fmt.Sprintf("no %s (run \"make images\")", filepath.Join(o.ImagesDir, "pause.tar"))
	}
	return ""
}

// ownerFile records which state dir's cluster holds the machine's real nodes.
var ownerFile = filepath.Join(nodeRunDir, "owner")

// claimNodes makes stateDir the owner of the machine's real nodes, unless a
// live cluster of another state dir holds them (busy is then its state dir).
// Leftovers of an owner that is gone are cleaned up first. The caller holds
// lockNodes.
func claimNodes(stateDir string) (busy string, err error) {
	b, err := os.ReadFile(ownerFile)
	if err == nil {
		prev := strings.TrimSpace(string(b))
		if prev != stateDir {
			if s, err := Load(prev); err == nil && len(s.RealNodes) > 0 {
				return prev, nil
			}
		}
		cleanupNodes(prev)
	} else if !errors.Is(err, os.ErrNotExist) {
		return "", fmt.Errorf("read real node owner: %w", err)
	}
	cleanupNodes(stateDir)
	if err := os.WriteFile(ownerFile, []byte(stateDir+"\n"), 0o644); err != nil {
		return "", fmt.Errorf("record real node owner: %w", err)
	}
	return "", nil
}

// lockNodes serializes the machine's clusters around the real nodes.
func lockNodes(ctx context.Context) (func(), error) {
	if err := os.MkdirAll(nodeRunDir, 0o755); err != nil {
		return nil, fmt.Errorf("create %s: %w", nodeRunDir, err)
	}
	return lockFile(ctx, filepath.Join(nodeRunDir, "lock"), syscall.LOCK_EX)
}

// machine is what the real nodes changed on this machine as a whole,
// recorded so that Down restores it.
type machine struct {
	// IPForward is net.ipv4.ip_forward before Up set it.
	IPForward string `json:"ipForward"`
}

func machineFile(stateDir string) string { return filepath.Join(stateDir, "nodes", "machine.json") }

// prepareNodes claims the real nodes and sets up their network before the
// control plane starts, which then listens on ControlPlaneIP. It returns no
// nodes and a reason when the cluster runs without them.
func prepareNodes(ctx context.Context, o Options) (_ []*RealNode, skipped string, err error) {
	if why := nodesUnavailable(o); why != "" {
		return nil, why, nil
	}
	unlock, err := lockNodes(ctx)
	if err != nil {
		return nil, "", err
	}
	defer unlock()
	busy, err := claimNodes(o.StateDir)
	if err != nil {
		return nil, "", err
	}
	if busy != "" {
		return nil, "in use by the cluster in " + busy, nil
	}
	root := filepath.Join(o.StateDir, "nodes")
	if err := os.RemoveAll(root); err != nil {
		return nil, "", fmt.Errorf("clean real nodes dir: %w", err)
	}
	if err := os.MkdirAll(root, 0o755); err != nil {
		return nil, "", fmt.Errorf("create real nodes dir: %w", err)
	}
	fwd, err := os.ReadFile("/proc/sys/net/ipv4/ip_forward")
	if err != nil {
		return nil, "", fmt.Errorf("read ip_forward: %w", err)
	}
	// Recorded before anything is set up, so that Down undoes a half setup.
	if err := writeJSON(machineFile(o.StateDir), machine{IPForward: strings.TrimSpace(string(fwd))}); err != nil {
		return nil, "", err
	}
	var nodes []*RealNode
	for i := range o.RealNodes {
		n := newRealNode(o.StateDir, i)
		if err := n.prepare(ctx); err != nil {
			return nil, "", err
		}
		nodes = append(nodes, n)
	}
	// Pods reach services (and each other through them) only with these;
	// the forward rules below keep their traffic on this machine's bridges.
	for file, v := range map[string]string{
		"/proc/sys/net/ipv4/ip_forward":                "1",
		"/proc/sys/net/bridge/bridge-nf-call-iptables": "1",
	} {
		if err := os.WriteFile(file, []byte(v), 0o644); err != nil {
			return nil, "", fmt.Errorf("set %s: %w", file, err)
		}
	}
	if err := nft(ctx, nodeRules); err != nil {
		return nil, "", err
	}
	return nodes, "", nil
}

// nodeRules keep pod traffic on this machine: forwarded traffic goes from one
// node's bridge to another's (pods of different nodes talk), never out
// through another interface (no masquerade is set up either).
var nodeRules = `table inet ` + nodeTable + ` {
	chain forward {
		type filter hook forward priority filter; policy accept;
		iifname "` + bridgePrefix + `*" oifname != "` + bridgePrefix + `*" counter drop
		oifname "` + bridgePrefix + `*" iifname != "` + bridgePrefix + `*" iifname != "lo" counter drop
	}
}
`

// releaseNodes cleans up the real nodes of stateDir and gives up the claim.
func releaseNodes(stateDir string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	unlock, err := lockNodes(ctx)
	if err != nil {
		return err
	}
	defer unlock()
	cleanupNodes(stateDir)
	if b, err := os.ReadFile(ownerFile); err == nil && strings.TrimSpace(string(b)) == stateDir {
		if err := os.Remove(ownerFile); err != nil {
			return fmt.Errorf("release real nodes: %w", err)
		}
	}
	return nil
}

// cleanupNodes undoes everything the real nodes of stateDir may have left:
// their processes and containers, mount namespaces, mounts, the bridges,
// firewall rules, sysctls. Errors are ignored: each step is best effort and
// safe to repeat, and Up runs it again before a new start.
func cleanupNodes(stateDir string) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dirs, _ := filepath.Glob(filepath.Join(stateDir, "nodes", "real-*"))
	for _, dir := range dirs {
		cleanupNode(ctx, dir)
	}
	// The private mount that held the nodes' mount namespace files.
	_ = syscall.Unmount(filepath.Join(nodeRunDir, "ns"), syscall.MNT_DETACH)
	_ = run(ctx, "nft", "delete", "table", "inet", nodeTable)
	// kube-proxy's own tables.
	for _, fam := range []string{"ip", "ip6"} {
		_ = run(ctx, "nft", "delete", "table", fam, "kube-proxy")
	}
	// iptables chains of CNI portmap (CNI-*) and the kubelet's canaries (KUBE-*).
	for _, cmd := range []string{"iptables", "ip6tables"} {
		for _, table := range []string{"nat", "filter", "mangle"} {
			out, err := exec.CommandContext(ctx, cmd, "-t", table, "-S").Output()
			if err == nil {
				cleanupChains(ctx, cmd, table, string(out))
			}
		}
	}
	var m machine
	if b, err := os.ReadFile(machineFile(stateDir)); err == nil && json.Unmarshal(b, &m) == nil && m.IPForward != "" {
		_ = os.WriteFile("/proc/sys/net/ipv4/ip_forward", []byte(m.IPForward), 0o644)
	}
}

// cleanupNode undoes what the real node in dir may have left on this
// machine, best effort: its processes and containers, mount namespace,
// bridge and run directory, and mounts below dir. The directory stays.
func cleanupNode(ctx context.Context, dir string) {
	var n RealNode
	if b, err := os.ReadFile(filepath.Join(dir, "node.json")); err == nil && json.Unmarshal(b, &n) == nil {
		n.kill()
		_ = run(ctx, "ip", "link", "del", n.Bridge)
		_ = os.RemoveAll(n.RunDir)
	}
	// Anything else started for it (a half start), and mounts below its
	// dir in this namespace, deepest first.
	for _, pid := range pidsMatching(func(cmdline string) bool {
		return strings.Contains(cmdline, dir+string(filepath.Separator))
	}) {
		killTree(pid)
	}
	for _, m := range mountsMatching(func(p string) bool { return strings.HasPrefix(p, dir+string(filepath.Separator)) }) {
		_ = syscall.Unmount(m, syscall.MNT_DETACH)
	}
}

// ourChain reports whether an iptables chain is one the nodes' CNI plugins
// or kubelets create.
func ourChain(name string) bool {
	return strings.HasPrefix(name, "CNI-") || strings.HasPrefix(name, "KUBE-")
}

// cleanupChains deletes the rules jumping to our chains and then the chains
// themselves, from "cmd -t table -S" output.
func cleanupChains(ctx context.Context, cmd, table, rules string) {
	var chains []string
	for _, line := range strings.Split(rules, "\n") {
		f := strings.Fields(line)
		switch {
		case len(f) >= 2 && f[0] == "-N" && ourChain(f[1]):
			chains = append(chains, f[1])
		case len(f) > 2 && f[0] == "-A" && !ourChain(f[1]) && slices.ContainsFunc(f[2:], ourChain):
			_ = run(ctx, append([]string{cmd, "-t", table, "-D"}, f[1:]...)...)
		}
	}
	for _, c := range chains {
		_ = run(ctx, cmd, "-t", table, "-F", c)
	}
	for _, c := range chains {
		_ = run(ctx, cmd, "-t", table, "-X", c)
	}
}

// pidsMatching lists the processes whose command line matches.
func pidsMatching(match func(cmdline string) bool) []int {
	return pidsWhere(func(pid string) bool {
		b, err := os.ReadFile("/proc/" + pid + "/cmdline")
		return err == nil && len(b) > 0 && match(string(bytes.ReplaceAll(b, []byte{0}, []byte{' '})))
	})
}

// pidsInMountNS lists the processes whose mount namespace is ns ("mnt:[N]",
// as /proc/<pid>/ns/mnt reads).
func pidsInMountNS(ns string) []int {
	return pidsWhere(func(pid string) bool {
		l, err := os.Readlink("/proc/" + pid + "/ns/mnt")
		return err == nil && l == ns
	})
}

// pidsWhere lists the processes but this one for which match holds.
func pidsWhere(match func(pid string) bool) []int {
	ents, _ := os.ReadDir("/proc")
	var pids []int
	self := os.Getpid()
	for _, e := range ents {
		if pid, err := strconv.Atoi(e.Name()); err == nil && pid != self && match(e.Name()) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// killTree SIGKILLs pid's descendants, then pid.
func killTree(pid int) {
	children, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", pid, pid))
	for _, c := range strings.Fields(string(children)) {
		if cp, err := strconv.Atoi(c); err == nil {
			killTree(cp)
		}
	}
	_ = syscall.Kill(pid, syscall.SIGKILL)
}

// mountsMatching lists mount points that match, deepest first.
func mountsMatching(match func(path string) bool) []string {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil
	}
	var out []string
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 5 {
			continue
		}
		p := unescapeMount(f[4])
		if match(p) {
			out = append(out, p)
		}
	}
	// Deepest first; equal paths (stacked mounts) side by side for Compact.
	slices.SortFunc(out, func(a, b string) int {
		if d := strings.Count(b, "/") - strings.Count(a, "/"); d != 0 {
			return d
		}
		return strings.Compare(a, b)
	})
	return slices.Compact(out)
}

// unescapeMount decodes the octal escapes (\040 for space) of mountinfo.
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func run(ctx context.Context, argv ...string) error {
	out, err := exec.CommandContext(ctx, argv[0], argv[1:]...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s: %w: %s", strings.Join(argv, " "), err, bytes.TrimSpace(out))
	}
	return nil
}

func nft(ctx context.Context, rules string) error {
	cmd := exec.CommandContext(ctx, "nft", "-f", "-")
	cmd.Stdin = strings.NewReader(rules)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("nft: %w: %s", err, bytes.TrimSpace(out))
	}
	return nil
}

func writeJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("encode %s: %w", filepath.Base(path), err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}
