// Package events posts Kubernetes Events on peer-finder's own pod for the
// changes of state an operator looks for with kubectl describe pod: the
// first delivery, the bootstrap role, a sink (hook or file) failing and
// recovering, the bootstrap timeout and a forbidden API request.
//
// The Events mirror log records: each of these changes is logged exactly
// once, with a constant message, where it happens, so Handler (a
// slog.Handler in front of the real one) turns those records into Events
// (Of is the pure mapping) and no component knows about Events. Sending is
// client-go's events broadcaster (events.k8s.io/v1, reporting controller
// "peer-finder"): it deduplicates repeats into a series and sends
// asynchronously, dropping when its queue is full, so posting never blocks
// delivery. When RBAC forbids creating Events, one warning is logged and
// nothing else changes.
package events

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"

	"github.com/flockd/flock/internal/kube"
)

// Controller is the Events' reportingController.
const Controller = "peer-finder"

// Event is one Event to post on the pod.
type Event struct {
	Type   string // corev1.EventTypeNormal or corev1.EventTypeWarning
	Reason string // CamelCase, e.g. BootstrapRole
	Action string // what peer-finder was doing, e.g. Deliver
	Note   string
}

// Recorder posts Events on one pod. Post never blocks; Stop sends what is
// queued, waiting a bounded time.
type Recorder struct {
	log       *slog.Logger
	client    kubernetes.Interface
	namespace string
	pod, uid  string

	mu        sync.RWMutex // Post holds it to read, Stop to close queue
	stopped   bool
	queue     chan Event
	done      chan struct{}
	delivered atomic.Bool // the first "peers delivered" was seen

	sink *trackingSink
}

// queueSize bounds the Events waiting for the pod's UID; more are dropped.
const queueSize = 64

// Start returns a Recorder for pod in namespace. uid is the pod's UID
// ($POD_UID); when empty the Recorder reads the pod once (get pods) so
// that kubectl describe pod shows the Events, and posts without a UID when
// it cannot. It sends until Stop.
func Start(ctx context.Context, client kubernetes.Interface, namespace, pod, uid string, log *slog.Logger) *Recorder {
	r := &Recorder{
		log: log, client: client, namespace: namespace, pod: pod, uid: uid,
		queue: make(chan Event, queueSize), done: make(chan struct{}),
		sink: &trackingSink{EventSinkImpl: events.EventSinkImpl{Interface: client.EventsV1()}, log: log},
	}
	go r.run(context.WithoutCancel(ctx))
	return r
}

func (r *Recorder) run(ctx context.Context) {
	defer close(r.done)
	ctx = klog.NewContext(ctx, kube.Logr(r.log.With("component", "events"))) // client-go's own lines at debug
	ref := &corev1.ObjectReference{Kind: "Pod", APIVersion: "v1", Namespace: r.namespace, Name: r.pod, UID: types.UID(r.uid)}
	if r.uid == "" {
		getCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
		p, err := r.client.CoreV1().Pods(r.namespace).Get(getCtx, r.pod, metav1.GetOptions{})
		cancel()
		if err == nil {
			ref.UID = p.UID
		} else {
			r.log.Debug("events without the pod's UID: cannot read the pod (set POD_UID from the downward API)", "pod", r.pod, "err", err)
		}
	}
	b := events.NewBroadcaster(r.sink)
	sendCtx, stopSending := context.WithCancel(ctx)
	defer stopSending()
	if err := b.StartRecordingToSinkWithContext(sendCtx); err != nil {
		r.log.Warn("cannot start posting events", "err", err)
		for range r.queue {
		}
		return
	}
	// Eventf hands each Event to the broadcaster on a goroutine of its own;
	// a second watcher counts what arrived, so Stop shuts the broadcaster
	// down only after every Event reached the sender.
	var arrived atomic.Int64
	stopCounting, err := b.StartEventWatcher(func(runtime.Object) { arrived.Add(1) })
	if err != nil {
		r.log.Warn("cannot start posting events", "err", err)
		for range r.queue {
		}
		return
	}
	rec := b.NewRecorder(scheme.Scheme, Controller)
	var posted int64
	for e := range r.queue {
		rec.Eventf(ref, nil, e.Type, e.Reason, e.Action, "%s", e.Note)
		posted++
	}
	for deadline := time.Now().Add(2 * time.Second); arrived.Load() < posted && time.Now().Before(deadline); {
		time.Sleep(5 * time.Millisecond)
	}
	stopCounting()
	b.Shutdown()
	r.sink.waitIdle(2 * time.Second)
}

// Post queues e; it never blocks (a full queue drops e). After Stop it
// does nothing.
func (r *Recorder) Post(e Event) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	if r.stopped {
		return
	}
	select {
	case r.queue <- e:
	default:
		r.log.Debug("event dropped: queue full", "reason", e.Reason)
	}
}

// Stop sends the queued Events and waits, at most a few seconds, until they
// were written or given up.
func (r *Recorder) Stop() {
	r.mu.Lock()
	if !r.stopped {
		r.stopped = true
		close(r.queue)
	}
	r.mu.Unlock()
	<-r.done
}

// trackingSink is the broadcaster's sink: it counts requests in flight, so
// that Stop can wait for them, and logs once when Events are forbidden.
type trackingSink struct {
	events.EventSinkImpl
	log *slog.Logger

	mu        sync.Mutex
	inFlight  int
	last      time.Time
	forbidden bool
}

func (s *trackingSink) track(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.inFlight--
	s.last = time.Now()
	if apierrors.IsForbidden(err) && !s.forbidden {
		s.forbidden = true
		s.log.Warn("cannot post events on this pod: the API server says forbidden; none are sent (grant create,patch on events.events.k8s.io, see examples/rbac/events.yaml, or pass -events=off)", "err", err)
	}
}

func (s *trackingSink) begin() {
	s.mu.Lock()
	s.inFlight++
	s.last = time.Now()
	s.mu.Unlock()
}

func (s *trackingSink) Create(ctx context.Context, e *eventsv1.Event) (*eventsv1.Event, error) {
	s.begin()
	out, err := s.EventSinkImpl.Create(ctx, e)
	s.track(err)
	return out, err
}

func (s *trackingSink) Update(ctx context.Context, e *eventsv1.Event) (*eventsv1.Event, error) {
	s.begin()
	out, err := s.EventSinkImpl.Update(ctx, e)
	s.track(err)
	return out, err
}

func (s *trackingSink) Patch(ctx context.Context, e *eventsv1.Event, data []byte) (*eventsv1.Event, error) {
	s.begin()
	out, err := s.EventSinkImpl.Patch(ctx, e, data)
	s.track(err)
	return out, err
}

// quiet is how long the sink must have been idle before waitIdle returns:
// the broadcaster hands each Event to the sink on a goroutine of its own
// moments after it was recorded.
const quiet = 200 * time.Millisecond

// waitIdle waits until no request is in flight and none started for quiet,
// or until limit passed.
func (s *trackingSink) waitIdle(limit time.Duration) {
	start := time.Now()
	for time.Since(start) < limit {
		s.mu.Lock()
		since := s.last
		if since.Before(start) {
			since = start
		}
		idle := s.inFlight == 0 && time.Since(since) >= quiet
		s.mu.Unlock()
		if idle {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}
