package controller

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	flockv1 "github.com/flockd/flock/api/v1alpha1"
)

func TestStorageOverlap(t *testing.T) {
	t0 := metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	t1 := metav1.NewTime(t0.Add(time.Hour))
	vol := func(ns, flock, path string, created metav1.Time) corev1.PersistentVolume {
		return corev1.PersistentVolume{
			ObjectMeta: metav1.ObjectMeta{Name: "v-" + flock, CreationTimestamp: created, Labels: map[string]string{flockv1.FlockLabel: flock, flockv1.NamespaceLabel: ns}},
			Spec:       corev1.PersistentVolumeSpec{PersistentVolumeSource: corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: path}}},
		}
	}
	f := testFlock() // db/zk, default path: /var/lib/flock/db/zk
	tests := []struct {
		name string
		pvs  []corev1.PersistentVolume
		want bool
	}{
		{name: "no other Flock", pvs: []corev1.PersistentVolume{vol("db", "zk", "/var/lib/flock/db/zk/data-0", t0)}},
		{name: "neighbours under the same root", pvs: []corev1.PersistentVolume{vol("db", "zk2", "/var/lib/flock/db/zk2/data-0", t0)}},
		{name: "same Flock name, other namespace", pvs: []corev1.PersistentVolume{vol("web", "zk", "/var/lib/flock/web/zk/data-0", t0)}},
		{name: "other Flock's directory is ours", pvs: []corev1.PersistentVolume{vol("x", "y", "/var/lib/flock/db/zk/data-0", t0)}, want: true},
		{name: "ours inside another Flock's member directory", pvs: []corev1.PersistentVolume{vol("x", "y", "/var/lib/flock/db", t0)}, want: true},
		{name: "another Flock inside ours", pvs: []corev1.PersistentVolume{vol("x", "y", "/var/lib/flock/db/zk/data-0/x/y/data-0", t0)}, want: true},
		{name: "we were there first: the later one is refused, not us", pvs: []corev1.PersistentVolume{vol("db", "zk", "/var/lib/flock/db/zk/data-0", t0), vol("x", "y", "/var/lib/flock/db/zk/data-0/x/y/data-0", t1)}},
		{name: "they were there first", pvs: []corev1.PersistentVolume{vol("db", "zk", "/var/lib/flock/db/zk/data-0", t1), vol("x", "y", "/var/lib/flock/db/zk/data-0/x/y/data-0", t0)}, want: true},
		{name: "prefix that is not a directory boundary", pvs: []corev1.PersistentVolume{vol("x", "y", "/var/lib/flock/db/zkx/data-0", t0)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := StorageOverlap(f, FlockDir(f), tt.pvs)
			if (got != nil) != tt.want {
				t.Errorf("StorageOverlap = %v, want refusal %v", got, tt.want)
			}
			if got != nil && got.Reason != RefusedStoragePathOverlap {
				t.Errorf("reason %s", got.Reason)
			}
		})
	}
}

func TestStoragePathAllowed(t *testing.T) {
	allow := []string{"/var/lib/flock", "/mnt/disks/"}
	tests := []struct {
		path  string
		allow []string
		ok    bool
	}{
		{"/var/lib/flock", allow, true},
		{"/var/lib/flock/etcd", allow, true},
		{"/mnt/disks/ssd0", allow, true},
		{"/mnt/disks", allow, true},
		{"/var/lib/flockx", allow, false}, // a prefix, not a parent
		{"/var/lib", allow, false},
		{"/home/user", allow, false},
		{"/anything", nil, true},
		{"/var/lib/flock", []string{}, false},
	}
	for _, tt := range tests {
		ref := StoragePathAllowed(tt.path, tt.allow)
		if (ref == nil) != tt.ok {
			t.Errorf("StoragePathAllowed(%q, %q) = %v, want allowed %v", tt.path, tt.allow, ref, tt.ok)
		}
		if ref != nil && (ref.Reason != RefusedStoragePathDenied || !strings.Contains(ref.Message, tt.path)) {
			t.Errorf("refusal %+v: want reason %s naming the path", ref, RefusedStoragePathDenied)
		}
	}
}
