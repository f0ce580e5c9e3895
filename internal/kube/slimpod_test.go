package kube_test

import (
	"bytes"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/flockd/flock/internal/kube"
	"github.com/flockd/flock/internal/kube/clientset"
)

// richPod has every field SlimPod keeps and many it skips (managed fields,
// volumes, env, probes, container statuses, ...), each non-zero.
func richPod(name string) *corev1.Pod {
	created := metav1.NewTime(time.Unix(1700000000, 0))
	deleted := metav1.NewTime(time.Unix(1700000100, 0)) // JSON keeps whole seconds
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, GenerateName: "web-", Namespace: "db", UID: "uid-" + "1234", ResourceVersion: "4711", Generation: 3,
			SelfLink: "/skipped", CreationTimestamp: created, DeletionTimestamp: &deleted, DeletionGracePeriodSeconds: ptr.To[int64](30),
			Labels:      map[string]string{"app": "web", "apps.kubernetes.io/pod-index": "0"},
			Annotations: map[string]string{"k8s.io/initial-events-end": "true", "note": "x"},
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: "apps/v1", Kind: "StatefulSet", Name: "web", UID: "sts-uid",
				Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true),
			}},
			Finalizers: []string{"skipped/finalizer"},
			ManagedFields: []metav1.ManagedFieldsEntry{{
				Manager: "kube-controller-manager", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "v1",
				FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:metadata":{}}`)},
			}},
		},
		Spec: corev1.PodSpec{
			Volumes:  []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data-web-0"}}}},
			NodeName: "node-1", Hostname: "web-0", Subdomain: "web",
			InitContainers: []corev1.Container{{Name: "init", Image: "busybox", Ports: []corev1.ContainerPort{{Name: "skipped", ContainerPort: 1}}}},
			Containers: []corev1.Container{
				{
					Name: "db", Image: "redis:7", Command: []string{"redis-server"},
					Env: []corev1.EnvVar{{Name: "A", Value: "b"}},
					Ports: []corev1.ContainerPort{
						{Name: "redis", ContainerPort: 6379, Protocol: corev1.ProtocolTCP, HostPort: 16379, HostIP: "0.0.0.0"},
						{Name: "gossip", ContainerPort: 16379, Protocol: corev1.ProtocolUDP},
					},
					Resources: corev1.ResourceRequirements{
						Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("64Mi")},
						Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1500m"), corev1.ResourceMemory: resource.MustParse("32Mi")},
					},
					ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(6379)}}},
				},
				{Name: "sidecar", Image: "peer-finder"},
			},
			Tolerations:  []corev1.Toleration{{Key: "k", Operator: corev1.TolerationOpExists}},
			NodeSelector: map[string]string{"zone": "a"},
		},
		Status: corev1.PodStatus{
			Phase: corev1.PodRunning,
			Conditions: []corev1.PodCondition{
				{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: created},
				{Type: corev1.PodReady, Status: corev1.ConditionFalse, Reason: "ContainersNotReady", Message: "m"},
			},
			HostIP: "192.168.0.1", HostIPs: []corev1.HostIP{{IP: "192.168.0.1"}},
			PodIP: "10.0.0.5", PodIPs: []corev1.PodIP{{IP: "10.0.0.5"}, {IP: "fd00::5"}},
			StartTime:         &created,
			ContainerStatuses: []corev1.ContainerStatus{{Name: "db", Ready: false, Image: "redis:7", ImageID: "sha256:x"}},
			QOSClass:          corev1.PodQOSBurstable,
		},
	}
}

// TestSlimPodDecodesWhatClientsetConverts: a pod and a pod list encoded as
// the API server encodes them (protobuf with its envelope, and JSON) decode
// through the SlimPods client's codecs into the SlimPods that
// clientset.SlimPodFrom converts the same pods to: every kept field is
// read from its own protobuf field number, every other one skipped.
func TestSlimPodDecodesWhatClientsetConverts(t *testing.T) {
	full := runtime.NewScheme()
	if err := corev1.AddToScheme(full); err != nil {
		t.Fatal(err)
	}
	cf := serializer.NewCodecFactory(full)
	pbInfo, ok := runtime.SerializerInfoForMediaType(cf.SupportedMediaTypes(), runtime.ContentTypeProtobuf)
	if !ok {
		t.Fatal("no protobuf serializer")
	}
	pb := cf.EncoderForVersion(pbInfo.Serializer, corev1.SchemeGroupVersion)
	js := cf.LegacyCodec(corev1.SchemeGroupVersion)
	plain := richPod("web-0")
	plain.DeletionTimestamp, plain.Annotations, plain.OwnerReferences, plain.Status.PodIPs = nil, nil, nil, nil
	list := &corev1.PodList{ListMeta: metav1.ListMeta{ResourceVersion: "99", Continue: "c"}, Items: []corev1.Pod{*richPod("web-0"), *plain}}

	for _, enc := range []struct {
		name string
		enc  runtime.Encoder
	}{{"protobuf", pb}, {"json", js}} {
		t.Run(enc.name, func(t *testing.T) {
			for _, p := range []*corev1.Pod{richPod("web-0"), plain} {
				var buf bytes.Buffer
				if err := enc.enc.Encode(p, &buf); err != nil {
					t.Fatal(err)
				}
				obj, err := kube.DecodeSlim(buf.Bytes())
				if err != nil {
					t.Fatal(err)
				}
				got, ok := obj.(*kube.SlimPod)
				if !ok {
					t.Fatalf("decoded %T, want *kube.SlimPod", obj)
				}
				want := clientset.SlimPodFrom(p)
				want.TypeMeta = got.TypeMeta
				if enc.name == "json" {
					// From JSON the whole metadata is kept.
					want.ObjectMeta = *p.ObjectMeta.DeepCopy()
				}
				if d := cmp.Diff(want, got); d != "" {
					t.Errorf("%s decoded (-want +got):\n%s", p.Name, d)
				}
			}

			var buf bytes.Buffer
			if err := enc.enc.Encode(list, &buf); err != nil {
				t.Fatal(err)
			}
			obj, err := kube.DecodeSlim(buf.Bytes())
			if err != nil {
				t.Fatal(err)
			}
			got, ok := obj.(*kube.SlimPodList)
			if !ok {
				t.Fatalf("decoded %T, want *kube.SlimPodList", obj)
			}
			if got.ResourceVersion != "99" || got.Continue != "c" || len(got.Items) != 2 {
				t.Fatalf("list meta %+v with %d items, want resourceVersion 99, continue c, 2 items", got.ListMeta, len(got.Items))
			}
			for i := range list.Items {
				want := clientset.SlimPodFrom(&list.Items[i])
				if enc.name == "json" {
					want.ObjectMeta = *list.Items[i].ObjectMeta.DeepCopy()
				}
				if d := cmp.Diff(want, &got.Items[i]); d != "" {
					t.Errorf("item %d decoded (-want +got):\n%s", i, d)
				}
			}
		})
	}
}

// TestSlimPodRejectsCorruptProtobuf: truncated or mistyped input is an
// error, never a partly filled pod passed on as whole.
func TestSlimPodRejectsCorruptProtobuf(t *testing.T) {
	p := richPod("web-0")
	b, err := p.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	var s kube.SlimPod
	if err := s.Unmarshal(b[:len(b)-3]); err == nil {
		t.Error("Unmarshal of a truncated pod: no error")
	}
	// Field 1 (metadata) as a varint instead of a message.
	if err := s.Unmarshal([]byte{0x08, 0x01}); err == nil {
		t.Error("Unmarshal of metadata with wire type varint: no error")
	}
	if err := s.Unmarshal(b); err != nil {
		t.Errorf("Unmarshal of the whole pod: %v", err)
	}
}

// TestSlimPodDeepCopy: a copy shares nothing with the original.
func TestSlimPodDeepCopy(t *testing.T) {
	a := clientset.SlimPodFrom(richPod("web-0"))
	b := a.DeepCopyObject().(*kube.SlimPod)
	if d := cmp.Diff(a, b); d != "" {
		t.Fatalf("copy differs (-orig +copy):\n%s", d)
	}
	b.Labels["app"] = "changed"
	b.Spec.Containers[0].Ports[0].Name = "changed"
	b.Status.Conditions[0].Status = "changed"
	b.Status.PodIPs[0].IP = "changed"
	if a.Labels["app"] != "web" || a.Spec.Containers[0].Ports[0].Name != "redis" || a.Status.Conditions[0].Status != "True" || a.Status.PodIPs[0].IP != "10.0.0.5" {
		t.Errorf("changing the copy changed the original: %+v", a)
	}
	l := &kube.SlimPodList{Items: []kube.SlimPod{*a}}
	lc := l.DeepCopyObject().(*kube.SlimPodList)
	lc.Items[0].Labels["app"] = "changed"
	if a.Labels["app"] != "web" {
		t.Error("changing the list copy changed the original")
	}
}
