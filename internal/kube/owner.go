package kube

import (
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// StatefulSetOf returns the name of the StatefulSet that controls the
// object, "" when its controller is something else or it has none.
func StatefulSetOf(m *metav1.ObjectMeta) string {
	ref := metav1.GetControllerOfNoCopy(m)
	if ref == nil || ref.Kind != "StatefulSet" || ref.APIVersion != appsv1.SchemeGroupVersion.String() {
		return ""
	}
	return ref.Name
}
