package kube

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/watchlist"
)

// Target names what a source reads from the API, for log lines and hints.
type Target struct {
	// Resource is the plural resource, group-qualified unless core, e.g.
	// "endpointslices.discovery.k8s.io" or "pods".
	Resource string
	// Namespace is the namespace read.
	Namespace string
	// Verbs are every verb the source needs on Resource, e.g. get, list, watch.
	Verbs []string
}

// Problem is a failed API request, classified for one clear log line.
type Problem struct {
	// Class is "forbidden", "unauthorized" or "error".
	Class string
	// Verb and Resource are what was refused (from the apiserver's message
	// when it says, else the request made).
	Verb, Resource string
	// User is who asked, as the apiserver names it, e.g.
	// "system:serviceaccount:db:peer-finder" (empty when unknown).
	User string
	Err  error
}

// forbiddenRE matches the apiserver's RBAC denial message.
var forbiddenRE = regexp.MustCompile(`User "([^"]*)" cannot (\S+) resource "([^"]*)" in API group "([^"]*)"`)

// Classify turns an error of verb on t into a Problem. It is pure.
func Classify(err error, verb string, t Target) Problem {
	p := Problem{Class: "error", Verb: verb, Resource: t.Resource, Err: err}
	switch {
	case apierrors.IsForbidden(err):
		p.Class = "forbidden"
		if m := forbiddenRE.FindStringSubmatch(err.Error()); m != nil {
			p.User, p.Verb, p.Resource = m[1], m[2], m[3]
			if m[4] != "" {
				p.Resource += "." + m[4]
			}
		}
	case apierrors.IsUnauthorized(err):
		p.Class = "unauthorized"
	}
	return p
}

// ServiceAccount returns "namespace/name" when User is a service account.
func (p Problem) ServiceAccount() string {
	if rest, ok := strings.CutPrefix(p.User, "system:serviceaccount:"); ok {
		return strings.Replace(rest, ":", "/", 1)
	}
	return ""
}

// Hint says how to grant what the source needs, as kubectl commands.
func (t Target) Hint(p Problem) string {
	sa := p.ServiceAccount()
	subject := "--serviceaccount=" + t.Namespace + ":<service-account>"
	if sa != "" {
		subject = "--serviceaccount=" + strings.Replace(sa, "/", ":", 1)
	} else if p.User != "" {
		subject = "--user=" + p.User
	}
	return fmt.Sprintf("kubectl -n %s create role peer-finder --verb=%s --resource=%s && kubectl -n %s create rolebinding peer-finder --role=peer-finder %s",
		t.Namespace, strings.Join(t.Verbs, ","), t.Resource, t.Namespace, subject)
}

// Describe is a one-line explanation of err for humans (diagnose mode).
func (t Target) Describe(err error, verb string) string {
	p := Classify(err, verb, t)
	switch p.Class {
	case "forbidden":
		who := cmp.Or(p.ServiceAccount(), p.User, "this client")
		return fmt.Sprintf("RBAC forbids %s to %s %s in namespace %s; grant %s: %s",
			who, p.Verb, p.Resource, t.Namespace, strings.Join(t.Verbs, ","), t.Hint(p))
	case "unauthorized":
		return fmt.Sprintf("the API server rejects the credentials (401): %v", err)
	}
	return fmt.Sprintf("%s %s in namespace %s: %v", verb, t.Resource, t.Namespace, err)
}

// ListerWatcher lists and watches with and without a context.
type ListerWatcher interface {
	cache.ListerWatcher
	cache.ListerWatcherWithContext
}

// Reporter logs the health of a source's API requests by change of state:
// one line when requests start failing (for RBAC: naming the verb, resource,
// namespace and service account, with the fix), one when they succeed
// again; repeats of the same failure go to debug. It is safe for
// concurrent use.
type Reporter struct {
	target      Target
	log         *slog.Logger
	now         func() time.Time
	metrics     *Metrics
	onForbidden func(Forbidden)

	mu       sync.Mutex
	failing  string // Problem.Class of the current run of failures; "" when healthy
	failures int
	since    time.Time
	last     error
}

// NewReporter returns a Reporter for t; nil log discards.
func NewReporter(t Target, log *slog.Logger) *Reporter {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Reporter{target: t, log: log, now: time.Now}
}

// WithMetrics makes r count failures and relists in m (nil: none) and
// returns r. Call it before r is used.
func (r *Reporter) WithMetrics(m *Metrics) *Reporter {
	r.metrics = m
	return r
}

// Forbidden is a request RBAC forbids, as a Reporter tells its
// OnForbidden callback.
type Forbidden struct {
	// Verb, Resource and Namespace are what was refused.
	Verb, Resource, Namespace string
	// Needs are the verbs to grant, comma-separated; Fix says how
	// (Target.Hint).
	Needs, Fix string
}

// OnForbidden makes r call f (nil: nothing) when requests start being
// forbidden, once per run of failures as the log line, and returns r. f
// must not block (peer-finder posts an Event). Call it before r is used.
func (r *Reporter) OnForbidden(f func(Forbidden)) *Reporter {
	r.onForbidden = f
	return r
}

// Failed records a failed request of verb.
func (r *Reporter) Failed(ctx context.Context, verb string, err error) {
	if ctx.Err() != nil || errors.Is(err, context.Canceled) {
		return
	}
	r.metrics.failed(r.target.Resource, verb, err)
	p := Classify(err, verb, r.target)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.failures++
	r.last = err
	if p.Class == r.failing {
		r.log.Debug("kubernetes API request failed again", "verb", verb, "resource", r.target.Resource, "failures", r.failures, "err", err)
		return
	}
	if r.failing == "" {
		r.since = r.now()
	}
	r.failing = p.Class
	switch p.Class {
	case "forbidden":
		f := Forbidden{Verb: p.Verb, Resource: p.Resource, Namespace: r.target.Namespace,
			Needs: strings.Join(r.target.Verbs, ","), Fix: r.target.Hint(p)}
		r.log.Error("kubernetes API forbids reading peers; keeping the last peer set and retrying with backoff",
			"verb", f.Verb, "resource", f.Resource, "namespace", f.Namespace,
			"serviceaccount", p.ServiceAccount(), "user", p.User,
			"needs", f.Needs, "fix", f.Fix)
		if r.onForbidden != nil {
			r.onForbidden(f)
		}
	case "unauthorized":
		r.log.Error("kubernetes API rejects the credentials; keeping the last peer set and retrying with backoff",
			"verb", verb, "resource", r.target.Resource, "namespace", r.target.Namespace, "err", err)
	default:
		r.log.Warn("kubernetes API request failed; keeping the last peer set and retrying with backoff",
			"verb", verb, "resource", r.target.Resource, "namespace", r.target.Namespace, "err", err)
	}
}

// Succeeded records a successful request.
func (r *Reporter) Succeeded() {
	r.metrics.succeeded(r.target.Resource)
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.failing == "" {
		return
	}
	r.log.Info("kubernetes API requests succeed again", "resource", r.target.Resource, "namespace", r.target.Namespace,
		"failures", r.failures, "after", r.now().Sub(r.since).Round(time.Millisecond))
	r.failing, r.failures, r.last = "", 0, nil
}

// Err returns the latest failure while requests are failing, else nil.
func (r *Reporter) Err() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.last
}

// ListerWatcher wraps lw so that every list and watch call is reported to
// r. client is the clientset lw was built from: a client that does not
// support streaming lists (a fake) disables them, as in client-go's own
// ToListWatcherWithWatchListSemantics.
func (r *Reporter) ListerWatcher(lw cache.ListerWatcherWithContext, client any) ListerWatcher {
	return &reportingLW{lw: lw, r: r, noWatchList: watchlist.DoesClientNotSupportWatchListSemantics(client)}
}

type reportingLW struct {
	lw          cache.ListerWatcherWithContext
	r           *Reporter
	noWatchList bool
	listed      atomic.Bool // a full list (plain or streaming) has succeeded
}

// listing counts a relist when a full list has succeeded before.
func (l *reportingLW) listing() {
	if l.listed.Load() {
		l.r.metrics.relisted(l.r.target.Resource)
	}
}

// IsWatchListSemanticsUnSupported is read by client-go's reflector.
func (l *reportingLW) IsWatchListSemanticsUnSupported() bool { return l.noWatchList }

func (l *reportingLW) List(options metav1.ListOptions) (runtime.Object, error) {
	return l.ListWithContext(context.Background(), options)
}

func (l *reportingLW) Watch(options metav1.ListOptions) (watch.Interface, error) {
	return l.WatchWithContext(context.Background(), options)
}

func (l *reportingLW) ListWithContext(ctx context.Context, options metav1.ListOptions) (runtime.Object, error) {
	l.listing()
	obj, err := l.lw.ListWithContext(ctx, options)
	if err != nil {
		l.r.Failed(ctx, "list", err)
		return nil, err
	}
	l.r.Succeeded()
	l.listed.Store(true)
	return obj, nil
}

func (l *reportingLW) WatchWithContext(ctx context.Context, options metav1.ListOptions) (watch.Interface, error) {
	// A watch that sends the initial events is a streaming list.
	streaming := options.SendInitialEvents != nil && *options.SendInitialEvents
	if streaming {
		l.listing()
	}
	w, err := l.lw.WatchWithContext(ctx, options)
	if err != nil {
		l.r.Failed(ctx, "watch", err)
		return nil, err
	}
	l.r.Succeeded()
	if streaming {
		l.listed.Store(true)
	}
	if m := l.r.metrics; m != nil {
		// Errors inside the stream (410 Gone when the resource version is
		// too old) end the watch and make the reflector relist: count them.
		resource := l.r.target.Resource
		w = watch.Filter(w, func(e watch.Event) (watch.Event, bool) {
			if e.Type == watch.Error {
				m.Failures.WithLabelValues(resource, "watch", Reason(apierrors.FromObject(e.Object))).Inc()
			}
			return e, true
		})
	}
	return w, nil
}
