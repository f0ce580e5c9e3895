package pods

import (
	"fmt"
	"strconv"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/flockd/flock/internal/ordinal"
)

// BenchmarkPeers5000 converts the slim pods of a 5,000-member StatefulSet.
func BenchmarkPeers5000(b *testing.B) {
	pods := make([]*Pod, 5000)
	for i := range pods {
		pods[i] = &Pod{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("web-%d", i), Namespace: "ns", UID: types.UID(fmt.Sprintf("uid-%d", i)),
				Labels: map[string]string{"app": "web", ordinal.PodIndexLabel: strconv.Itoa(i)}},
			Hostname: fmt.Sprintf("web-%d", i), Subdomain: "web", Node: fmt.Sprintf("node-%d", i%100),
			Phase: corev1.PodRunning, IPs: []string{fmt.Sprintf("10.%d.%d.%d", i>>16&0xff, i>>8&0xff, i&0xff)}, Ready: true,
		}
	}
	o := Options{Service: "web", Namespace: "ns", Domain: "cluster.local"}
	b.ReportAllocs()
	for b.Loop() {
		if n := len(Peers(pods, o)); n != 5000 {
			b.Fatalf("%d peers", n)
		}
	}
}
