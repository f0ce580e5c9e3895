package status

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/flockd/flock/internal/testing/golden"
)

const fq = ".db.ns.svc.cluster.local"

// report is a workload in every state a row can show.
func report() Report {
	at := time.Date(2026, 12, 4, 23, 0, 0, 0, time.UTC)
	all := []string{"db-0" + fq, "db-1" + fq, "db-2" + fq}
	ok := []Sink{{Name: "on-change", State: "ok", HoldsBack: true}}
	return Report{Version: ReportVersion, Namespace: "ns", Selector: "app=db", Members: []Member{
		{Pod: "db-0", Node: "n0", Phase: "Running", Ready: true, Status: &Document{
			Version: 1, Self: "db-0" + fq, Ready: true, Generation: 3,
			Delivered: &Delivered{Generation: 3, At: at, Peers: all, Bootstrap: "form", Former: "db-0" + fq},
			Verdict:   Verdict{Reason: "publish", Peers: 3, Need: 3}, Sinks: ok,
		}},
		{Pod: "db-1", Node: "n1", Phase: "Running", Ready: true, Status: &Document{
			Version: 1, Self: "db-1" + fq, Ready: true, Generation: 4,
			Delivered: &Delivered{Generation: 3, At: at, Peers: all, Bootstrap: "join", Former: "db-0" + fq},
			HeldBy:    &Hold{Gate: GateSinkFailing, Detail: "on-change: exit status 1"},
			Verdict:   Verdict{Reason: "publish", Peers: 4, Need: 3},
			Sinks: []Sink{{Name: "hosts-file", State: "failing", Error: "locked by pid 7"},
				{Name: "on-change", State: "failing", HoldsBack: true, Error: "exit status 1"}},
			Warnings: []string{"hosts-file: another writer: db-9 pid 3"},
		}},
		{Pod: "db-2", Node: "n2", Phase: "Running", Status: &Document{
			Version: 1, Self: "db-2" + fq, Generation: 0,
			HeldBy:  &Hold{Gate: "too-few-peers", Detail: "2 of 3 peers visible"},
			Verdict: Verdict{Reason: "too-few-peers", Detail: "2 of 3 peers visible", Peers: 2, Need: 3}, Sinks: ok,
		}},
		{Pod: "db-3", Node: "n0", Phase: "Running", Error: "the server is currently unable to handle the request: error trying to reach service: dial tcp 10.0.0.4:9090: connect: connection refused"},
		{Pod: "db-4", Phase: "Pending", Error: "pod is pending, not Running"},
	}}
}

func TestWriteTableGolden(t *testing.T) {
	var b bytes.Buffer
	if err := WriteTable(&b, report()); err != nil {
		t.Fatal(err)
	}
	golden.Check(t, "table", b.Bytes())
}

// TestWriteJSONGolden: the -o json output, and it reads back as the same
// Report (scripts decode what the command encodes).
func TestWriteJSONGolden(t *testing.T) {
	var b bytes.Buffer
	if err := WriteJSON(&b, report()); err != nil {
		t.Fatal(err)
	}
	golden.Check(t, "report.json", b.Bytes())
	var back Report
	if err := json.Unmarshal(b.Bytes(), &back); err != nil {
		t.Fatal(err)
	}
	var again bytes.Buffer
	if err := WriteJSON(&again, back); err != nil || again.String() != b.String() {
		t.Errorf("the JSON does not read back as the same report (%v):\n%s", err, again.String())
	}
}

func TestMemberOrder(t *testing.T) {
	names := []string{"db-stray", "web-10", "web-2", "db-0"}
	slices.SortFunc(names, memberOrder)
	if want := []string{"db-0", "web-2", "web-10", "db-stray"}; !slices.Equal(names, want) {
		t.Errorf("sorted %v, want %v", names, want)
	}
}

func TestAnswered(t *testing.T) {
	r := report()
	if r.Answered() {
		t.Error("Answered() = true with db-3 and db-4 silent")
	}
	r.Members = r.Members[:3]
	if !r.Answered() {
		t.Error("Answered() = false when every member answered")
	}
	if (Report{}).Answered() {
		t.Error("Answered() = true for no members")
	}
}

func TestProxyPort(t *testing.T) {
	running := func(init, main []corev1.ContainerPort) *corev1.Pod {
		return &corev1.Pod{
			Spec: corev1.PodSpec{
				InitContainers: []corev1.Container{{Name: "peer-finder", Ports: init}},
				Containers:     []corev1.Container{{Name: "app", Ports: main}},
			},
			Status: corev1.PodStatus{Phase: corev1.PodRunning},
		}
	}
	metrics := []corev1.ContainerPort{{Name: "peer", ContainerPort: 7000}, {Name: "metrics", ContainerPort: 9090}}
	for _, tc := range []struct {
		name string
		pod  *corev1.Pod
		port string
		want int32
		err  string
	}{
		{"named, in a container", running(nil, metrics), "metrics", 9090, ""},
		{"named, in a native sidecar", running(metrics, nil), "metrics", 9090, ""},
		{"a number", running(nil, nil), "8080", 8080, ""},
		{"no such name", running(nil, metrics), "http", 0, `no container port named "http"`},
		{"not running", &corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodPending}}, "metrics", 0, "pod is pending, not Running"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := proxyPort(tc.pod, tc.port)
			if got != tc.want || (err == nil) != (tc.err == "") || err != nil && !strings.Contains(err.Error(), tc.err) {
				t.Errorf("proxyPort = %d, %v; want %d, %q", got, err, tc.want, tc.err)
			}
		})
	}
}

func TestDescribe(t *testing.T) {
	pods := schema.GroupResource{Resource: "pods"}
	for _, tc := range []struct {
		name string
		err  error
		want string
	}{
		{"unreachable", apierrors.NewGenericServerResponse(503, "get", pods, "db-0:9090", "error trying to reach service: dial tcp 10.0.0.4:9090: connect: connection refused", 0, true),
			"the server is currently unable to handle the request (get pods db-0:9090): error trying to reach service: dial tcp 10.0.0.4:9090: connect: connection refused"},
		{"no /status", apierrors.NewGenericServerResponse(404, "get", pods, "db-0:9090", "404 page not found", 0, true),
			"port 9090 has no /status: a peer-finder older than this command, or -port names another server: 404 page not found"},
		{"forbidden", apierrors.NewForbidden(schema.GroupResource{Resource: "pods/proxy"}, "db-0:9090", errors.New("no RBAC")),
			`pods/proxy "db-0:9090" is forbidden: no RBAC (see examples/status/rbac.yaml)`},
		{"forbidden, undecoded", apierrors.NewGenericServerResponse(403, "get", pods, "db-0:9090", "", 0, true),
			"forbidden: (get pods db-0:9090) (see examples/status/rbac.yaml)"},
		{"other", fmt.Errorf("get: %w", io.ErrUnexpectedEOF), "wrapped: get: unexpected EOF"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := describe(fmt.Errorf("wrapped: %w", tc.err), 9090); got != tc.want {
				t.Errorf("describe =\n%s\nwant\n%s", got, tc.want)
			}
		})
	}
}

// TestParseUsageErrors: each bad command line is refused naming its flag.
func TestParseUsageErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "-l: a label selector is required"},
		{[]string{"-l", "app=db", "-o", "yaml"}, `-o: "yaml" is not table or json`},
		{[]string{"-l", "app in (db"}, "-l: "},
		{[]string{"-l", "app=db", "-timeout=0s"}, "-timeout: 0s is not positive"},
		{[]string{"-l", "app=db", "-port="}, "-port: empty"},
		{[]string{"-l", "app=db", "extra"}, `unexpected argument "extra"`},
		{[]string{"-bogus"}, "-bogus"},
	} {
		_, err := parse(tc.args, io.Discard)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("parse(%q) = %v, want an error with %q", tc.args, err, tc.want)
		}
	}
	o, err := parse([]string{"-n", "db", "-l", "app=db", "-o", "json", "-port", "9090"}, io.Discard)
	if err != nil || o.namespace != "db" || o.selector != "app=db" || o.output != "json" || o.port != "9090" || o.timeout != 10*time.Second {
		t.Errorf("parse = %+v, %v", o, err)
	}
}
