package kube

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/flockd/flock/internal/testing/logtest"
)

var target = Target{Resource: "endpointslices.discovery.k8s.io", Namespace: "db", Verbs: []string{"list", "watch"}}

func forbidden() error {
	return apierrors.NewForbidden(schema.GroupResource{Group: "discovery.k8s.io", Resource: "endpointslices"}, "",
		errors.New(`User "system:serviceaccount:db:zk" cannot watch resource "endpointslices" in API group "discovery.k8s.io" in the namespace "db"`))
}

func TestClassify(t *testing.T) {
	tests := []struct {
		err                          error
		class, verb, resource, sa, u string
	}{
		{forbidden(), "forbidden", "watch", "endpointslices.discovery.k8s.io", "db/zk", "system:serviceaccount:db:zk"},
		{apierrors.NewUnauthorized("bad token"), "unauthorized", "list", target.Resource, "", ""},
		{errors.New("connection refused"), "error", "list", target.Resource, "", ""},
	}
	for _, tt := range tests {
		p := Classify(tt.err, "list", target)
		if p.Class != tt.class || p.Verb != tt.verb || p.Resource != tt.resource || p.ServiceAccount() != tt.sa || p.User != tt.u {
			t.Errorf("Classify(%v) = %+v", tt.err, p)
		}
	}
	if h := target.Hint(Classify(forbidden(), "list", target)); !strings.Contains(h, "--verb=list,watch") || !strings.Contains(h, "--serviceaccount=db:zk") {
		t.Errorf("hint %q", h)
	}
}

func TestReporterLogsOncePerState(t *testing.T) {
	logs := logtest.New()
	r := NewReporter(target, logs.Logger())
	ctx := context.Background()
	for range 5 {
		r.Failed(ctx, "list", forbidden())
	}
	r.Failed(ctx, "list", errors.New("connection refused")) // a new state
	r.Failed(ctx, "list", errors.New("connection refused"))
	r.Succeeded()
	r.Succeeded()
	r.Failed(context.Background(), "watch", context.Canceled) // shutdown: silent
	for what, recs := range map[string][]logtest.Record{
		"errors (forbidden)":            logs.AtLevel(slog.LevelError),
		"warnings (connection refused)": logs.AtLevel(slog.LevelWarn),
		"recoveries":                    logs.Find("kubernetes API requests succeed again"),
	} {
		if len(recs) != 1 {
			t.Errorf("%s: %v, want one", what, recs)
		}
	}
	if r.Err() != nil {
		t.Errorf("Err after recovery = %v", r.Err())
	}
}

// OnForbidden hears of a forbidden run of failures once, with what the
// log line says: what was refused, the verbs to grant and how.
func TestReporterOnForbiddenOncePerState(t *testing.T) {
	var got []Forbidden
	r := NewReporter(target, nil).OnForbidden(func(f Forbidden) { got = append(got, f) })
	ctx := context.Background()
	for range 3 {
		r.Failed(ctx, "list", forbidden())
	}
	r.Failed(ctx, "list", errors.New("connection refused")) // not forbidden: no call
	r.Succeeded()
	r.Failed(ctx, "list", forbidden()) // a new run of failures
	if len(got) != 2 {
		t.Fatalf("OnForbidden called %d times, want 2 (once per run of forbidden failures): %+v", len(got), got)
	}
	f := got[0]
	if f.Verb != "watch" || f.Resource != "endpointslices.discovery.k8s.io" || f.Namespace != "db" || f.Needs != "list,watch" ||
		!strings.Contains(f.Fix, "--serviceaccount=db:zk") {
		t.Errorf("OnForbidden(%+v), want watch endpointslices.discovery.k8s.io in db, needs list,watch, a fix for db:zk", f)
	}
}
