package realnode

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/portforward"
	"k8s.io/client-go/transport/spdy"
	"k8s.io/utils/ptr"

	"github.com/flockd/flock/localcluster"
)

// TestPodLikeARealCluster checks what flock's images rely on: a bridge IP,
// the kubelet's /etc/hosts, a resolv.conf with the cluster search path and
// ndots:5, cluster names resolved through CoreDNS by the C library, the
// kubernetes Service through kube-proxy, and logs, exec and port-forward
// through the apiserver and the kubelet.
func TestPodLikeARealCluster(t *testing.T) {
	b := newBed(t)
	b.createPod(&corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "probe"},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{{
				Name: "probe", Image: Image,
				Command: []string{"/bin/bash", "-c", `cat /etc/resolv.conf; echo ---; cat /etc/hosts; echo ---
getent hosts kubernetes.default.svc.cluster.local || echo "getent failed"
echo ---; id -u
exec busybox httpd -f -p 8080 -h /etc`},
				SecurityContext: &corev1.SecurityContext{ReadOnlyRootFilesystem: ptr.To(true)},
			}},
		},
	})
	p := b.waitPod("probe", "running", 2*time.Minute, containerRunning("probe"))
	node := b.realNode(p.Spec.NodeName)
	if _, bridge, _ := net.ParseCIDR(node.PodCIDR); !bridge.Contains(net.ParseIP(p.Status.PodIP)) {
		t.Errorf("pod IP %q is not on %s's bridge %s", p.Status.PodIP, node.Name, node.PodCIDR)
	}
	log := b.waitLog("probe", "probe", "---\n65532", time.Minute)
	for _, want := range []string{
		"nameserver " + localcluster.DNSServiceIP,
		"search " + b.ns + ".svc.cluster.local svc.cluster.local cluster.local",
		"options ndots:5",
		"# Kubernetes-managed hosts file",
		p.Status.PodIP + "\tprobe",
		"10.96.0.1       kubernetes.default.svc.cluster.local",
	} {
		if !strings.Contains(log, want) {
			t.Errorf("probe output lacks %q:\n%s", want, log)
		}
	}
	out, err := b.exec("probe", "probe", "cat", "/etc/hostname")
	if err != nil || strings.TrimSpace(out) != "probe" {
		t.Errorf("exec cat /etc/hostname = %q, %v; want probe", out, err)
	}

	// port-forward to the pod's httpd, which serves /etc.
	req := b.Client.CoreV1().RESTClient().Post().Resource("pods").Namespace(b.ns).Name("probe").SubResource("portforward")
	tr, upgrader, err := spdy.RoundTripperFor(b.Config)
	if err != nil {
		t.Fatal(err)
	}
	dialer := spdy.NewDialer(upgrader, &http.Client{Transport: tr}, http.MethodPost, req.URL())
	stop, ready := make(chan struct{}), make(chan struct{})
	defer close(stop)
	fw, err := portforward.NewOnAddresses(dialer, []string{"127.0.0.1"}, []string{"0:8080"}, stop, ready, io.Discard, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	go fw.ForwardPorts() //nolint:errcheck // ends with stop
	select {
	case <-ready:
	case <-time.After(30 * time.Second):
		t.Fatal("port-forward not ready within 30s")
	}
	ports, err := fw.GetPorts()
	if err != nil || len(ports) != 1 {
		t.Fatalf("forwarded ports: %v %v", ports, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	hreq, _ := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("http://127.0.0.1:%d/hostname", ports[0].Local), nil)
	resp, err := http.DefaultClient.Do(hreq)
	if err != nil {
		t.Fatalf("GET through port-forward: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if strings.TrimSpace(string(body)) != "probe" {
		t.Errorf("GET /hostname through port-forward = %d %q, want probe", resp.StatusCode, body)
	}
}
