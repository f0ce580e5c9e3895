package controller

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	flockv1 "github.com/flockd/flock/api/v1alpha1"
)

func TestMode(t *testing.T) {
	defaultClass := &storagev1.StorageClass{
		ObjectMeta:  metav1.ObjectMeta{Name: "standard", Annotations: map[string]string{defaultClassAnnotation: "true"}},
		Provisioner: "example.com/disk",
	}
	otherClass := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "slow"}, Provisioner: "example.com/disk"}
	ownVolume := &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{
		Name: "v", Labels: map[string]string{flockv1.FlockLabel: "zk", flockv1.NamespaceLabel: "db"},
	}}
	tests := []struct {
		name    string
		spec    flockv1.Mode
		status  flockv1.Mode
		noVCT   bool
		objects []client.Object
		want    flockv1.Mode
	}{
		{name: "Auto without volumeClaimTemplates is NodePinned even with a default class", spec: flockv1.ModeAuto, noVCT: true, objects: []client.Object{defaultClass}, want: flockv1.ModeNodePinned},
		{name: "explicit NodePinned", spec: flockv1.ModeNodePinned, objects: []client.Object{defaultClass}, want: flockv1.ModeNodePinned},
		{name: "explicit NetworkStorage", spec: flockv1.ModeNetworkStorage, want: flockv1.ModeNetworkStorage},
		{name: "Auto with a default class", spec: flockv1.ModeAuto, objects: []client.Object{otherClass, defaultClass}, want: flockv1.ModeNetworkStorage},
		{name: "Auto without a default class", spec: flockv1.ModeAuto, objects: []client.Object{otherClass}, want: flockv1.ModeNodePinned},
		{name: "Auto keeps its recorded choice", spec: flockv1.ModeAuto, status: flockv1.ModeNodePinned, objects: []client.Object{defaultClass}, want: flockv1.ModeNodePinned},
		{name: "Auto with existing local volumes (status lost)", spec: flockv1.ModeAuto, objects: []client.Object{defaultClass, ownVolume}, want: flockv1.ModeNodePinned},
	}
	s, err := Scheme()
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := fake.NewClientBuilder().WithScheme(s).WithObjects(tt.objects...).Build()
			r := &Reconciler{Client: c, APIReader: c}
			f := testFlock(func(f *flockv1.Flock) {
				f.Spec.Mode, f.Status.Mode = tt.spec, tt.status
				if !tt.noVCT {
					f.Spec.Storage.VolumeClaimTemplates = []corev1.PersistentVolumeClaim{{ObjectMeta: metav1.ObjectMeta{Name: "data"}}}
				}
			})
			got, err := r.mode(context.Background(), f)
			if err != nil || got != tt.want {
				t.Errorf("mode = %s, %v; want %s", got, err, tt.want)
			}
		})
	}
}
