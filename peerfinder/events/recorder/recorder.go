// Package recorder posts peer-finder's Events (package events) on its own
// pod. Sending (events.k8s.io/v1, reporting controller "peer-finder") is
// asynchronous, dropping when the queue is full, so posting never blocks
// delivery; a repeat of an Event within seriesWindow updates its series
// (count and last time) instead of creating another, as client-go's events
// broadcaster does. The broadcaster itself is not used: it links
// client-go's clientset and every API group (see bench/README.md,
// "Footprint"). When RBAC forbids creating Events, one warning is logged
// and nothing else changes.
package recorder

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/flockd/flock/internal/kube"
	"github.com/flockd/flock/peerfinder/events"
)

// Recorder posts Events on one pod: it is the events.Emitter when Events
// are on. Emit never blocks; Stop sends what is queued, waiting a bounded
// time.
type Recorder struct {
	log       *slog.Logger
	client    *kube.Client
	namespace string
	pod, uid  string
	instance  string // reportingInstance
	now       func() time.Time

	mu        sync.RWMutex // Post holds it to read, Stop to close queue
	stopped   bool
	queue     chan events.Event
	done      chan struct{}
	forbidden bool // logged once; owned by run
	series    map[events.Event]*eventsv1.Event
}

// queueSize bounds the Events waiting to be sent; more are dropped.
const queueSize = 64

// seriesWindow is how long a repeated Event extends the first one's series
// (client-go's broadcaster: 6 minutes).
const seriesWindow = 6 * time.Minute

// stopBudget bounds how long Stop waits for queued Events to be sent.
const stopBudget = 2 * time.Second

// Start returns a Recorder for pod in namespace. uid is the pod's UID
// ($POD_UID); when empty the Recorder reads the pod once (get pods) so
// that kubectl describe pod shows the Events, and posts without a UID when
// it cannot. It sends until Stop.
func Start(ctx context.Context, client *kube.Client, namespace, pod, uid string, log *slog.Logger) *Recorder {
	host, _ := os.Hostname()
	r := &Recorder{
		log: log, client: client, namespace: namespace, pod: pod, uid: uid, instance: events.Controller + "-" + host, now: time.Now,
		queue: make(chan events.Event, queueSize), done: make(chan struct{}), series: make(map[events.Event]*eventsv1.Event),
	}
	go r.run(context.WithoutCancel(ctx))
	return r
}

func (r *Recorder) run(ctx context.Context) {
	defer close(r.done)
	ref := corev1.ObjectReference{Kind: "Pod", APIVersion: "v1", Namespace: r.namespace, Name: r.pod, UID: types.UID(r.uid)}
	if r.uid == "" {
		getCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
		p, err := r.client.SlimPods(r.namespace).Get(getCtx, r.pod, metav1.GetOptions{})
		cancel()
		if err == nil {
			ref.UID = p.UID
		} else {
			r.log.Debug("events without the pod's UID: cannot read the pod (set POD_UID from the downward API)", "pod", r.pod, "err", err)
		}
	}
	var deadline time.Time // set once Stop closed the queue
	for e := range r.queue {
		r.mu.RLock()
		stopping := r.stopped
		r.mu.RUnlock()
		if stopping && deadline.IsZero() {
			deadline = time.Now().Add(stopBudget)
		}
		sendCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
		if !deadline.IsZero() {
			if time.Now().After(deadline) {
				cancel()
				r.log.Debug("event dropped: stopping", "reason", e.Reason)
				continue
			}
			sendCtx, cancel = context.WithDeadline(ctx, deadline)
		}
		r.send(sendCtx, ref, e)
		cancel()
	}
}

// send creates e, or extends the series of the same Event sent within
// seriesWindow.
func (r *Recorder) send(ctx context.Context, ref corev1.ObjectReference, e events.Event) {
	api := r.client.Events(r.namespace)
	now := r.now()
	if prev := r.series[e]; prev != nil && now.Sub(prev.EventTime.Time) < seriesWindow {
		count := int32(2)
		if prev.Series != nil {
			count = prev.Series.Count + 1
		}
		patch, _ := json.Marshal(map[string]any{"series": eventsv1.EventSeries{Count: count, LastObservedTime: metav1.NewMicroTime(now)}})
		out, err := api.Patch(ctx, prev.Name, types.MergePatchType, patch, metav1.PatchOptions{})
		if err == nil {
			r.series[e] = out
			return
		}
		r.failed(err, e)
		if !apierrors.IsNotFound(err) {
			return
		}
	}
	ev := &eventsv1.Event{
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s.%x", ref.Name, now.UnixNano()), Namespace: r.namespace},
		EventTime:  metav1.NewMicroTime(now), ReportingController: events.Controller, ReportingInstance: r.instance,
		Action: e.Action, Reason: string(e.Reason), Regarding: ref, Note: e.Note, Type: e.Type,
	}
	out, err := api.Create(ctx, ev, metav1.CreateOptions{})
	if err != nil {
		r.failed(err, e)
		return
	}
	r.series[e] = out
}

// failed logs a failed request: once at warning when forbidden, else at debug.
func (r *Recorder) failed(err error, e events.Event) {
	if apierrors.IsForbidden(err) {
		if !r.forbidden {
			r.forbidden = true
			r.log.Warn("cannot post events on this pod: the API server says forbidden; none are sent (grant create,patch on events.events.k8s.io, see examples/rbac/events.yaml, or pass -events=off)", "err", err)
		}
		return
	}
	r.log.Debug("event not sent", "reason", e.Reason, "err", err)
}

// Emit queues e; it never blocks (a full queue drops e). After Stop, or on
// a nil Recorder, it does nothing.
func (r *Recorder) Emit(e events.Event) {
	if r == nil {
		return
	}
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
	if r == nil {
		return
	}
	r.mu.Lock()
	if !r.stopped {
		r.stopped = true
		close(r.queue)
	}
	r.mu.Unlock()
	<-r.done
}
