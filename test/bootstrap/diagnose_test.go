package bootstrap

import (
	"strings"
	"testing"

	"github.com/flockd/flock/internal/testing/fixture"
	"github.com/flockd/flock/localcluster/clustertest"
	"github.com/flockd/flock/peerfinder"
)

// TestDiagnoseExplainsWhatHoldsDelivery covers the classic "Have not found
// myself" causes through real CoreDNS and a real Service: a service that
// hides not-ready members, and a wrong cluster domain.
func TestDiagnoseExplainsWhatHoldsDelivery(t *testing.T) {
	c := clustertest.Get(t)
	ns := c.Namespace(t)
	fixture.HeadlessService(t, c.Client, ns, false) // no publishNotReadyAddresses
	fixture.StatefulSet(t, c.Client, ns, 1, fixture.StatefulSetOptions{PodAnnotations: map[string]string{"test.flockd.io/ready": "false"}})
	fixture.WaitRunningPod(t, c.Client, ns, "web-0", "")

	tests := []struct {
		name string
		args []string
		want []string
	}{
		{name: "not-ready member hidden by the service",
			args: []string{"-source=dns"},
			want: []string{"publishNotReadyAddresses=false", "verdict:   wait: no-peers", "does not set publishNotReadyAddresses: true"}},
		{name: "wrong domain",
			args: []string{"-source=dns", "-domain=cluster.example"},
			want: []string{"verdict:   wait", "DNS has no records for web." + ns + ".svc.cluster.example"}},
		{name: "endpointslice source without -include-not-ready",
			args: []string{"-source=endpointslice"},
			want: []string{"source endpointslice: 0 peers", "-include-not-ready"}},
		{name: "the fix: -include-not-ready sees the member",
			args: []string{"-source=endpointslice", "-include-not-ready"},
			want: []string{"verdict:   deliver (1 peers)"}},
		// diagnose's own first sight of the set is its last change: with
		// -stable-for longer than diagnose watches, it said "set changed 0s
		// ago" and exit 1 for a set unchanged for hours (issue 36 #22).
		{name: "the fix: -stable-for is a wait, not a cause",
			args: []string{"-source=endpointslice", "-include-not-ready", "-stable-for=30s"},
			want: []string{"verdict:   deliver (1 peers) once the set stays unchanged for 30s (-stable-for)"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := pf{c: c, ns: ns, pod: "web-0", args: append([]string{"-kubeconfig=" + c.Kubeconfig, "-diagnose"}, tt.args...)}
			code, out, stderr := p.main(t.Context())
			wantCode := peerfinder.ExitError
			if strings.HasPrefix(tt.name, "the fix") {
				wantCode = peerfinder.ExitOK
			}
			if code != wantCode {
				t.Errorf("exit %d, want %d", code, wantCode)
			}
			for _, w := range tt.want {
				if !strings.Contains(out, w) {
					t.Errorf("output lacks %q", w)
				}
			}
			if t.Failed() {
				t.Logf("output:\n%s\n%s", out, stderr)
			}
		})
	}
}
