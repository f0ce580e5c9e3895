// Command hostdir-provisioner is the local cluster's volume provisioner: a
// claim of its StorageClass, once the scheduler picked one of the real
// nodes, gets a directory made here, by this process, in that node's own
// directory on this machine (which the node sees at -path), and a hostPath
// PersistentVolume pinned to that node; a released volume's directory is
// removed. It replaces rancher's local-path-provisioner,
// whose helper pod per claim cost 9 s (p50) on every OrderedReady step of the
// campaign. The claim and volume bookkeeping (selected node, binding,
// provisioned-by, reclaim, retries) is sig-storage-lib-external-provisioner's.
//
// Built by "flock-cluster build" as a component; not part of the main module.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"
	"sigs.k8s.io/sig-storage-lib-external-provisioner/v13/controller"
)

func main() {
	kubeconfig := flag.String("kubeconfig", "", "kubeconfig of the cluster")
	name := flag.String("provisioner-name", "", "provisioner name of the StorageClass")
	path := flag.String("path", "", "directory the volumes are in, as the nodes see it")
	p := &hostDirs{dirs: map[string]string{}}
	flag.Func("node", "NAME=DIR: a node (kubernetes.io/hostname) and the directory on this machine it sees at -path; repeat per node", func(v string) error {
		node, dir, ok := strings.Cut(v, "=")
		if !ok || node == "" || !filepath.IsAbs(dir) {
			return fmt.Errorf("want NAME=/DIR, not %q", v)
		}
		p.dirs[node] = filepath.Clean(dir)
		return nil
	})
	flag.Parse()
	for f, v := range map[string]string{"kubeconfig": *kubeconfig, "provisioner-name": *name, "path": *path} {
		if v == "" {
			fmt.Fprintf(os.Stderr, "-%s is required\n", f)
			os.Exit(2)
		}
	}
	if len(p.dirs) == 0 {
		fmt.Fprintln(os.Stderr, "-node is required")
		os.Exit(2)
	}
	p.path = filepath.Clean(*path)
	if err := run(*kubeconfig, *name, p); err != nil {
		slog.Error("hostdir-provisioner failed", "err", err)
		os.Exit(1)
	}
}

func run(kubeconfig, name string, p *hostDirs) error {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return fmt.Errorf("load kubeconfig: %w", err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("client: %w", err)
	}
	for _, dir := range p.dirs {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return fmt.Errorf("volumes dir: %w", err)
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	ctx = klog.NewContext(ctx, klog.Background())
	slog.Info("hostdir-provisioner started", "provisioner", name, "nodes", p.dirs, "path", p.path)
	// One process per cluster: no leader election.
	controller.NewProvisionController(ctx, cs, name, p, controller.LeaderElection(false)).Run(ctx)
	return nil
}

// hostDirs makes and removes volume directories: a volume of node N is
// path/<name> to N's pods, dirs[N]/<name> here.
type hostDirs struct {
	path string
	dirs map[string]string
}

// Provision makes the claim's directory, writable by any user as
// local-path's was (pods run as non-root users), and returns its volume.
func (p *hostDirs) Provision(_ context.Context, o controller.ProvisionOptions) (*corev1.PersistentVolume, controller.ProvisioningState, error) {
	dir, ok := p.dirs[o.SelectedNodeName]
	if !ok {
		return nil, controller.ProvisioningFinished, fmt.Errorf("volumes exist only on the real nodes, not on %q", o.SelectedNodeName)
	}
	base := o.PVName + "_" + o.PVC.Namespace + "_" + o.PVC.Name
	local := filepath.Join(dir, base)
	if err := os.Mkdir(local, 0o777); err != nil && !errors.Is(err, os.ErrExist) {
		return nil, controller.ProvisioningFinished, fmt.Errorf("make %s: %w", local, err)
	}
	if err := os.Chmod(local, 0o777); err != nil { // the umask took some bits
		return nil, controller.ProvisioningFinished, fmt.Errorf("chmod %s: %w", local, err)
	}
	path := filepath.Join(p.path, base)
	reclaim := corev1.PersistentVolumeReclaimDelete
	if o.StorageClass.ReclaimPolicy != nil {
		reclaim = *o.StorageClass.ReclaimPolicy
	}
	slog.Info("volume provisioned", "pv", o.PVName, "claim", o.PVC.Namespace+"/"+o.PVC.Name, "node", o.SelectedNodeName, "dir", local)
	return &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: o.PVName},
		Spec: corev1.PersistentVolumeSpec{
			PersistentVolumeReclaimPolicy: reclaim,
			AccessModes:                   o.PVC.Spec.AccessModes,
			VolumeMode:                    o.PVC.Spec.VolumeMode,
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: o.PVC.Spec.Resources.Requests[corev1.ResourceStorage]},
			PersistentVolumeSource: corev1.PersistentVolumeSource{
				HostPath: &corev1.HostPathVolumeSource{Path: path, Type: new(corev1.HostPathDirectory)},
			},
			NodeAffinity: &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
				MatchExpressions: []corev1.NodeSelectorRequirement{{Key: corev1.LabelHostname, Operator: corev1.NodeSelectorOpIn, Values: []string{o.SelectedNodeName}}},
			}}}},
		},
	}, controller.ProvisioningFinished, nil
}

// Delete removes the volume's directory on its node; a path outside the
// volumes directory, or a node it does not know, is refused, not removed.
func (p *hostDirs) Delete(_ context.Context, pv *corev1.PersistentVolume) error {
	if pv.Spec.HostPath == nil {
		return &controller.IgnoredError{Reason: "not a hostPath volume"}
	}
	path := filepath.Clean(pv.Spec.HostPath.Path)
	if filepath.Dir(path) != p.path || !strings.HasPrefix(filepath.Base(path), pv.Name+"_") {
		return fmt.Errorf("volume %s: path %s is not one of %s", pv.Name, path, p.path)
	}
	node := pinnedNode(pv)
	dir, ok := p.dirs[node]
	if !ok {
		return fmt.Errorf("volume %s: node %q is not one of mine", pv.Name, node)
	}
	local := filepath.Join(dir, filepath.Base(path))
	if err := os.RemoveAll(local); err != nil {
		return fmt.Errorf("remove %s: %w", local, err)
	}
	slog.Info("volume deleted", "pv", pv.Name, "node", node, "dir", local)
	return nil
}

// pinnedNode is the node a volume's affinity names, or "".
func pinnedNode(pv *corev1.PersistentVolume) string {
	if pv.Spec.NodeAffinity == nil || pv.Spec.NodeAffinity.Required == nil {
		return ""
	}
	for _, t := range pv.Spec.NodeAffinity.Required.NodeSelectorTerms {
		for _, e := range t.MatchExpressions {
			if e.Key == corev1.LabelHostname && e.Operator == corev1.NodeSelectorOpIn && len(e.Values) == 1 {
				return e.Values[0]
			}
		}
	}
	return ""
}
