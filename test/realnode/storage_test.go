package realnode

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/flockd/flock/localcluster"
)

// TestDefaultStorageClass: a StatefulSet's volumeClaimTemplates get real
// volumes from the default StorageClass, and a member that is deleted comes
// back to its own data.
func TestDefaultStorageClass(t *testing.T) {
	b := newBed(t)
	b.service("db")
	spec := corev1.PodSpec{Containers: []corev1.Container{{
		Name: "db", Image: Image,
		Command:      []string{"/bin/bash", "-c", `[ -e /data/id ] || echo "$HOSTNAME $RANDOM" > /data/id; echo "data: $(cat /data/id)"; exec sleep infinity`},
		VolumeMounts: []corev1.VolumeMount{{Name: "data", MountPath: "/data"}},
	}}}
	onRealNode(&spec)
	_, err := b.Client.AppsV1().StatefulSets(b.ns).Create(context.Background(), &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: "db"},
		Spec: appsv1.StatefulSetSpec{
			ServiceName: "db", Replicas: ptr.To[int32](1),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "db"}},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "db"}}, Spec: spec},
			VolumeClaimTemplates: []corev1.PersistentVolumeClaim{{
				ObjectMeta: metav1.ObjectMeta{Name: "data"},
				Spec: corev1.PersistentVolumeClaimSpec{
					AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
					Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("10Mi")}},
				},
			}},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	first := b.waitLog("db-0", "db", "data: ", 3*time.Minute)
	pvc, err := b.Client.CoreV1().PersistentVolumeClaims(b.ns).Get(context.Background(), "data-db-0", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if sc := ptr.Deref(pvc.Spec.StorageClassName, ""); sc != localcluster.StorageClass || pvc.Status.Phase != corev1.ClaimBound {
		t.Errorf("claim data-db-0: class %q, phase %s; want %s, Bound", sc, pvc.Status.Phase, localcluster.StorageClass)
	}
	old := b.waitPod("db-0", "running", time.Minute, containerRunning("db"))
	if err := b.Client.CoreV1().Pods(b.ns).Delete(context.Background(), "db-0", metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}); err != nil {
		t.Fatal(err)
	}
	b.waitPod("db-0", "re-created", 2*time.Minute, func(p *corev1.Pod) bool { return p.UID != old.UID && containerRunning("db")(p) })
	second := b.waitLog("db-0", "db", "data: ", time.Minute)
	if strings.TrimSpace(first) != strings.TrimSpace(second) {
		t.Errorf("the re-created member lost its data: first %q, then %q", first, second)
	}

	// The volume is a directory of this machine, the real node, holding what
	// the member wrote; the claim's deletion (reclaim policy Delete) removes
	// the volume and its directory.
	pv, err := b.Client.CoreV1().PersistentVolumes().Get(context.Background(), pvc.Spec.VolumeName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if pv.Spec.HostPath == nil {
		t.Fatalf("volume %s is not a directory of the node: %+v", pv.Name, pv.Spec.PersistentVolumeSource)
	}
	// The node sees it at NodeVolumesDir, its own directory there.
	if !strings.HasPrefix(pv.Spec.HostPath.Path, localcluster.NodeVolumesDir+"/") {
		t.Errorf("volume %s at %s, want below %s", pv.Name, pv.Spec.HostPath.Path, localcluster.NodeVolumesDir)
	}
	dir := b.realNode(old.Spec.NodeName).HostPath(pv.Spec.HostPath.Path)
	if id, err := os.ReadFile(filepath.Join(dir, "id")); err != nil || !strings.Contains(first, strings.TrimSpace(string(id))) {
		t.Errorf("volume dir %s: id %q (%v), the member said %q", dir, id, err, first)
	}
	if err := b.Client.AppsV1().StatefulSets(b.ns).Delete(context.Background(), "db", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := b.Client.CoreV1().PersistentVolumeClaims(b.ns).Delete(context.Background(), "data-db-0", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	b.WaitFor(t, "volume "+pv.Name+" and its directory removed", 2*time.Minute, func(ctx context.Context) (bool, error) {
		_, err := b.Client.CoreV1().PersistentVolumes().Get(ctx, pv.Name, metav1.GetOptions{})
		_, statErr := os.Stat(dir)
		return apierrors.IsNotFound(err) && errors.Is(statErr, fs.ErrNotExist), nil
	})
}
