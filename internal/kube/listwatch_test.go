package kube

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
)

// recordingAPI records the options of each request.
type recordingAPI struct{ got []metav1.ListOptions }

func (r *recordingAPI) List(_ context.Context, o metav1.ListOptions) (*corev1.PodList, error) {
	r.got = append(r.got, o)
	return &corev1.PodList{}, nil
}

func (r *recordingAPI) Watch(_ context.Context, o metav1.ListOptions) (watch.Interface, error) {
	r.got = append(r.got, o)
	return watch.NewEmptyWatch(), nil
}

func TestSelectedListWatch(t *testing.T) {
	for _, tt := range []struct {
		name         string
		label, field string
		caller, want metav1.ListOptions
	}{
		{"label", "app=web", "", metav1.ListOptions{ResourceVersion: "7"}, metav1.ListOptions{ResourceVersion: "7", LabelSelector: "app=web"}},
		{"field", "", "metadata.name=web", metav1.ListOptions{}, metav1.ListOptions{FieldSelector: "metadata.name=web"}},
		{"both replace the caller's", "app=web", "metadata.name=web", metav1.ListOptions{LabelSelector: "x", FieldSelector: "y"},
			metav1.ListOptions{LabelSelector: "app=web", FieldSelector: "metadata.name=web"}},
		{"none keeps the caller's", "", "", metav1.ListOptions{LabelSelector: "x"}, metav1.ListOptions{LabelSelector: "x"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			api := &recordingAPI{}
			lw := SelectedListWatch(api, tt.label, tt.field)
			if _, err := lw.ListWithContext(t.Context(), tt.caller); err != nil {
				t.Fatal(err)
			}
			w, err := lw.WatchWithContext(t.Context(), tt.caller)
			if err != nil {
				t.Fatal(err)
			}
			w.Stop()
			if len(api.got) != 2 || api.got[0] != tt.want || api.got[1] != tt.want {
				t.Errorf("requests %+v, want list and watch with %+v", api.got, tt.want)
			}
		})
	}
}
