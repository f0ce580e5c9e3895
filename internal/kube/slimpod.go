package kube

import (
	"context"
	"errors"
	"fmt"
	"maps"

	"google.golang.org/protobuf/encoding/protowire"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
)

// SlimPodClient gets, lists and watches pods as SlimPods.
type SlimPodClient interface {
	ListWatchAPI[*SlimPodList]
	Get(ctx context.Context, name string, opts metav1.GetOptions) (*SlimPod, error)
}

// SlimPod is the part of a pod that peer-finder reads, decoded straight
// from the API server's answer (Client.SlimPods): the protobuf decoder
// below skips every other field, so listing 1,000 pods allocates little
// more than what is kept, and runs none of k8s.io/api/core/v1's generated
// Unmarshal code (spread over 1.7 MB of the binary, each first touch
// mapping 64 KiB of it into the process; see bench/README.md).
//
// From protobuf, ObjectMeta holds only Name, GenerateName, Namespace, UID,
// ResourceVersion, Generation, CreationTimestamp, DeletionTimestamp,
// Labels, Annotations (a watch's bookmarks are marked there) and
// OwnerReferences. From JSON (a server that does not offer protobuf) it
// holds the whole metadata. Field names and JSON keys are those of
// corev1.Pod.
type SlimPod struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              SlimPodSpec   `json:"spec,omitempty"`
	Status            SlimPodStatus `json:"status,omitempty"`
}

// SlimPodSpec is the part of corev1.PodSpec in a SlimPod.
type SlimPodSpec struct {
	Containers []SlimContainer `json:"containers,omitempty"`
	NodeName   string          `json:"nodeName,omitempty"`
	Hostname   string          `json:"hostname,omitempty"`
	Subdomain  string          `json:"subdomain,omitempty"`
}

// SlimContainer is the part of corev1.Container in a SlimPod.
type SlimContainer struct {
	Ports     []SlimContainerPort `json:"ports,omitempty"`
	Resources SlimResources       `json:"resources,omitempty"`
}

// SlimResources is the part of corev1.ResourceRequirements in a SlimPod:
// the requests, each quantity in its canonical string form ("500m").
type SlimResources struct {
	Requests map[string]string `json:"requests,omitempty"`
}

// SlimContainerPort is the part of corev1.ContainerPort in a SlimPod.
type SlimContainerPort struct {
	Name          string `json:"name,omitempty"`
	ContainerPort int32  `json:"containerPort"`
	Protocol      string `json:"protocol,omitempty"`
}

// SlimPodStatus is the part of corev1.PodStatus in a SlimPod.
type SlimPodStatus struct {
	Phase      string             `json:"phase,omitempty"`
	Conditions []SlimPodCondition `json:"conditions,omitempty"`
	PodIP      string             `json:"podIP,omitempty"`
	PodIPs     []SlimPodIP        `json:"podIPs,omitempty"`
}

// SlimPodCondition is the part of corev1.PodCondition in a SlimPod.
type SlimPodCondition struct {
	Type   string `json:"type"`
	Status string `json:"status"`
}

// SlimPodIP is corev1.PodIP.
type SlimPodIP struct {
	IP string `json:"ip"`
}

// SlimPodList is a list of SlimPods (a PodList on the wire).
type SlimPodList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []SlimPod `json:"items"`
}

// DeepCopyObject implements runtime.Object.
func (p *SlimPod) DeepCopyObject() runtime.Object {
	if p == nil {
		return nil
	}
	out := &SlimPod{TypeMeta: p.TypeMeta, Spec: p.Spec, Status: p.Status}
	p.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	if p.Spec.Containers != nil {
		out.Spec.Containers = make([]SlimContainer, len(p.Spec.Containers))
		for i, c := range p.Spec.Containers {
			out.Spec.Containers[i].Ports = append([]SlimContainerPort(nil), c.Ports...)
			out.Spec.Containers[i].Resources.Requests = maps.Clone(c.Resources.Requests)
		}
	}
	out.Status.Conditions = append([]SlimPodCondition(nil), p.Status.Conditions...)
	out.Status.PodIPs = append([]SlimPodIP(nil), p.Status.PodIPs...)
	return out
}

// DeepCopyObject implements runtime.Object.
func (l *SlimPodList) DeepCopyObject() runtime.Object {
	if l == nil {
		return nil
	}
	out := &SlimPodList{TypeMeta: l.TypeMeta}
	l.ListMeta.DeepCopyInto(&out.ListMeta)
	if l.Items != nil {
		out.Items = make([]SlimPod, len(l.Items))
		for i := range l.Items {
			out.Items[i] = *l.Items[i].DeepCopyObject().(*SlimPod)
		}
	}
	return out
}

// Reset clears p; with Unmarshal it is what apimachinery's protobuf
// serializer asks of a decoded object.
func (p *SlimPod) Reset() { *p = SlimPod{} }

// Reset clears l.
func (l *SlimPodList) Reset() { *l = SlimPodList{} }

// Unmarshal decodes a k8s.io.api.core.v1.Pod message, keeping SlimPod's
// fields and skipping the others.
func (p *SlimPod) Unmarshal(b []byte) error {
	return eachField(b, func(n protowire.Number, t protowire.Type, v []byte) error {
		switch n {
		case 1:
			return message(t, v, func(b []byte) error { return unmarshalObjectMeta(&p.ObjectMeta, b) })
		case 2:
			return message(t, v, p.Spec.unmarshal)
		case 3:
			return message(t, v, p.Status.unmarshal)
		}
		return nil
	})
}

// Unmarshal decodes a k8s.io.api.core.v1.PodList message.
func (l *SlimPodList) Unmarshal(b []byte) error {
	return eachField(b, func(n protowire.Number, t protowire.Type, v []byte) error {
		switch n {
		case 1:
			return message(t, v, l.ListMeta.Unmarshal)
		case 2:
			l.Items = append(l.Items, SlimPod{})
			return message(t, v, l.Items[len(l.Items)-1].Unmarshal)
		}
		return nil
	})
}

func (s *SlimPodSpec) unmarshal(b []byte) error {
	return eachField(b, func(n protowire.Number, t protowire.Type, v []byte) error {
		switch n {
		case 2: // containers
			s.Containers = append(s.Containers, SlimContainer{})
			c := &s.Containers[len(s.Containers)-1]
			return message(t, v, func(b []byte) error {
				return eachField(b, func(n protowire.Number, t protowire.Type, v []byte) error {
					switch n {
					case 6: // ports
						c.Ports = append(c.Ports, SlimContainerPort{})
						return message(t, v, c.Ports[len(c.Ports)-1].unmarshal)
					case 8: // resources
						return message(t, v, c.Resources.unmarshal)
					}
					return nil
				})
			})
		case 10:
			return str(t, v, &s.NodeName)
		case 16:
			return str(t, v, &s.Hostname)
		case 17:
			return str(t, v, &s.Subdomain)
		}
		return nil
	})
}

// unmarshal reads ResourceRequirements' requests (field 2), a
// map<string, Quantity>.
func (r *SlimResources) unmarshal(b []byte) error {
	return eachField(b, func(n protowire.Number, t protowire.Type, v []byte) error {
		if n != 2 {
			return nil
		}
		return mapEntry(t, v, &r.Requests, quantity)
	})
}

// quantity reads a resource.Quantity message: its one string (field 1),
// the canonical form.
func quantity(t protowire.Type, v []byte, s *string) error {
	return message(t, v, func(b []byte) error {
		return eachField(b, func(n protowire.Number, t protowire.Type, v []byte) error {
			if n != 1 {
				return nil
			}
			return str(t, v, s)
		})
	})
}

func (p *SlimContainerPort) unmarshal(b []byte) error {
	return eachField(b, func(n protowire.Number, t protowire.Type, v []byte) error {
		switch n {
		case 1:
			return str(t, v, &p.Name)
		case 3:
			x, err := varint(t, v)
			p.ContainerPort = int32(x)
			return err
		case 4:
			return str(t, v, &p.Protocol)
		}
		return nil
	})
}

func (s *SlimPodStatus) unmarshal(b []byte) error {
	return eachField(b, func(n protowire.Number, t protowire.Type, v []byte) error {
		switch n {
		case 1:
			return str(t, v, &s.Phase)
		case 2:
			s.Conditions = append(s.Conditions, SlimPodCondition{})
			c := &s.Conditions[len(s.Conditions)-1]
			return message(t, v, func(b []byte) error {
				return eachField(b, func(n protowire.Number, t protowire.Type, v []byte) error {
					switch n {
					case 1:
						return str(t, v, &c.Type)
					case 2:
						return str(t, v, &c.Status)
					}
					return nil
				})
			})
		case 6:
			return str(t, v, &s.PodIP)
		case 12:
			s.PodIPs = append(s.PodIPs, SlimPodIP{})
			ip := &s.PodIPs[len(s.PodIPs)-1]
			return message(t, v, func(b []byte) error {
				return eachField(b, func(n protowire.Number, t protowire.Type, v []byte) error {
					if n == 1 {
						return str(t, v, &ip.IP)
					}
					return nil
				})
			})
		}
		return nil
	})
}

// unmarshalObjectMeta decodes the fields of a
// k8s.io.apimachinery.pkg.apis.meta.v1.ObjectMeta message listed in
// SlimPod's doc (not managedFields, the bulk of a pod's metadata).
func unmarshalObjectMeta(m *metav1.ObjectMeta, b []byte) error {
	return eachField(b, func(n protowire.Number, t protowire.Type, v []byte) error {
		switch n {
		case 1:
			return str(t, v, &m.Name)
		case 2:
			return str(t, v, &m.GenerateName)
		case 3:
			return str(t, v, &m.Namespace)
		case 5:
			var uid string
			err := str(t, v, &uid)
			m.UID = types.UID(uid)
			return err
		case 6:
			return str(t, v, &m.ResourceVersion)
		case 7:
			x, err := varint(t, v)
			m.Generation = int64(x)
			return err
		case 8:
			return message(t, v, m.CreationTimestamp.Unmarshal)
		case 9:
			m.DeletionTimestamp = new(metav1.Time)
			return message(t, v, m.DeletionTimestamp.Unmarshal)
		case 11:
			return mapEntry(t, v, &m.Labels, str)
		case 12:
			return mapEntry(t, v, &m.Annotations, str)
		case 13:
			m.OwnerReferences = append(m.OwnerReferences, metav1.OwnerReference{})
			return message(t, v, m.OwnerReferences[len(m.OwnerReferences)-1].Unmarshal)
		}
		return nil
	})
}

var errWireType = errors.New("unexpected protobuf wire type")

// eachField calls f with each field of the protobuf message b: its number,
// wire type and encoded value.
func eachField(b []byte, f func(n protowire.Number, t protowire.Type, v []byte) error) error {
	for len(b) > 0 {
		n, t, l := protowire.ConsumeTag(b)
		if l < 0 {
			return protowire.ParseError(l)
		}
		b = b[l:]
		m := protowire.ConsumeFieldValue(n, t, b)
		if m < 0 {
			return fmt.Errorf("field %d: %w", n, protowire.ParseError(m))
		}
		if err := f(n, t, b[:m]); err != nil {
			return fmt.Errorf("field %d: %w", n, err)
		}
		b = b[m:]
	}
	return nil
}

// message decodes the embedded message v (wire type t) with f.
func message(t protowire.Type, v []byte, f func([]byte) error) error {
	if t != protowire.BytesType {
		return errWireType
	}
	b, _ := protowire.ConsumeBytes(v) // eachField checked the length
	return f(b)
}

func str(t protowire.Type, v []byte, s *string) error {
	if t != protowire.BytesType {
		return errWireType
	}
	b, _ := protowire.ConsumeBytes(v)
	*s = string(b)
	return nil
}

func varint(t protowire.Type, v []byte) (uint64, error) {
	if t != protowire.VarintType {
		return 0, errWireType
	}
	x, _ := protowire.ConsumeVarint(v)
	return x, nil
}

// mapEntry adds the map entry v to *m, its value read by value: str for a
// map<string, string>.
func mapEntry(t protowire.Type, v []byte, m *map[string]string, value func(protowire.Type, []byte, *string) error) error {
	var k, val string
	err := message(t, v, func(b []byte) error {
		return eachField(b, func(n protowire.Number, t protowire.Type, v []byte) error {
			switch n {
			case 1:
				return str(t, v, &k)
			case 2:
				return value(t, v, &val)
			}
			return nil
		})
	})
	if err != nil {
		return err
	}
	if *m == nil {
		*m = map[string]string{}
	}
	(*m)[k] = val
	return nil
}
