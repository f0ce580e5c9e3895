package bootstrap

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"

	"github.com/flockd/flock/internal/kube"
	"github.com/flockd/flock/internal/ordinal"
	"github.com/flockd/flock/internal/retry"
	"github.com/flockd/flock/peerfinder/events"
)

// ErrNoStatefulSet is returned by Replicas.Run when this pod is not
// controlled by a StatefulSet, so -expect=auto cannot work.
var ErrNoStatefulSet = errors.New("pod is not controlled by a StatefulSet")

// Replicas is the expected size of the cluster from the StatefulSet that
// controls this pod: it reads the pod, follows its controller
// ownerReference, and watches that StatefulSet's spec.replicas (and
// spec.ordinals.start). It implements engine.SizeSource.
//
// RBAC: get on pods (this pod), and list and watch on statefulsets.
type Replicas struct {
	Client    *kube.Client
	Namespace string
	// Pod is this pod's name.
	Pod    string
	Logger *slog.Logger
	// Metrics counts the StatefulSet watch's failures and relists with the
	// sources' (nil: none).
	Metrics *kube.Metrics
	// Events is told when RBAC forbids reading this pod
	// (events.OwnPodForbidden); nil: never.
	Events events.Emitter
	// OnForbidden is told when RBAC forbids the StatefulSet watch, as the
	// sources' (kube.Reporter.OnForbidden); nil: never.
	OnForbidden func(kube.Forbidden)
	// RetryMin and RetryMax bound the backoff while the pod cannot be read.
	// Defaults: 1s and 30s.
	RetryMin, RetryMax time.Duration
	// InitMode is true when the one delivery is awaited in an init
	// container: then, for an OrderedReady StatefulSet, the expected size
	// is this member and the ordinals below it (see Expected).
	InitMode bool

	first atomic.Int64
	total atomic.Int64 // spec.replicas, whatever InitMode
	owner atomic.Pointer[string]
	// ordinal is this pod's ordinal, -1 when unknown.
	ordinal int
}

// Expected is the size to wait for: spec.replicas, except for a member in
// init mode (InitMode) of an OrderedReady StatefulSet (the default policy).
// Such a StatefulSet creates a pod only once every lower ordinal is Ready,
// and a pod is not Ready while its init container waits, so a member can
// never see more than itself and the ordinals below it: it waits for those
// (ordinal - first + 1), at most spec.replicas. ordinal < 0 means unknown.
func Expected(ss *appsv1.StatefulSet, ordinal int, initMode bool) int {
	n := 1
	if ss.Spec.Replicas != nil {
		n = int(*ss.Spec.Replicas)
	}
	if !initMode || ordinal < 0 || ss.Spec.PodManagementPolicy == appsv1.ParallelPodManagement {
		return n
	}
	first := 0
	if ss.Spec.Ordinals != nil {
		first = int(ss.Spec.Ordinals.Start)
	}
	if k := ordinal - first + 1; k >= 1 && k < n {
		return k
	}
	return n
}

// FirstOrdinal returns the StatefulSet's first ordinal (spec.ordinals.start),
// 0 until the StatefulSet was read.
func (r *Replicas) FirstOrdinal() int { return int(r.first.Load()) }

// Size returns the StatefulSet's spec.replicas (not Expected's init-mode
// share of it), 0 until the StatefulSet was read: the members whose rank
// -form-rank awaits.
func (r *Replicas) Size() int { return int(r.total.Load()) }

// StatefulSet returns the owning StatefulSet's name, "" until known.
func (r *Replicas) StatefulSet() string {
	if p := r.owner.Load(); p != nil {
		return *p
	}
	return ""
}

// Owner returns the name of the StatefulSet that controls pod.
func Owner(pod *metav1.ObjectMeta) (string, error) {
	name := kube.StatefulSetOf(pod)
	if name == "" {
		return "", fmt.Errorf("pod %s/%s: %w", pod.Namespace, pod.Name, ErrNoStatefulSet)
	}
	return name, nil
}

// Run resolves the owner, reading the own pod with retry (kube.OwnPod; a
// failure is logged once per distinct error), then sends spec.replicas on
// up whenever it changes. The StatefulSet is watched like the sources'
// resources (kube.Watcher over a kube.Reporter's ListerWatcher), so a
// forbidden or failing watch is logged once per change of state and
// counted in flock_kube_*. It returns ErrNoStatefulSet (wrapped) when the
// pod has no StatefulSet controller.
func (r *Replicas) Run(ctx context.Context, up chan<- int) error {
	log := r.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	var lastErr string
	pod, err := kube.OwnPod(ctx, r.Client.Pods(r.Namespace), r.Pod, retry.Backoff{Min: r.RetryMin, Max: r.RetryMax},
		func(err error, retryIn time.Duration) {
			if msg := err.Error(); msg != lastErr {
				lastErr = msg
				forbidden := apierrors.IsForbidden(err)
				log.Error("cannot read own pod for -expect=auto, retrying", "pod", r.Pod, "namespace", r.Namespace,
					"forbidden", forbidden, "retry_in", retryIn, "err", err)
				if forbidden {
					events.OrNop(r.Events).Emit(events.OwnPodForbidden(err))
				}
			}
		})
	if err != nil {
		return nil // ctx ended
	}
	name, err := Owner(&pod.ObjectMeta)
	if err != nil {
		return err
	}
	r.ordinal = ordinal.Of(pod.Name, pod.Labels, name)
	r.owner.Store(&name)
	log.Info("expected size follows statefulset", "statefulset", name)

	target := kube.Target{Resource: "statefulsets.apps", Namespace: r.Namespace, Verbs: []string{"list", "watch"}}
	rep := kube.NewReporter(target, log).WithMetrics(r.Metrics).OnForbidden(r.OnForbidden)
	byName := fields.OneTermEqualSelector("metadata.name", name).String()
	sent := -1
	return kube.Watcher[size]{
		ListerWatcher: rep.ListerWatcher(kube.SelectedListWatch(r.Client.StatefulSets(r.Namespace), "", byName), r.Client),
		ObjectType:    &appsv1.StatefulSet{},
		Transform:     slimStatefulSet,
		Snapshot:      func(objs []any) size { return sizeOf(name, objs, r.ordinal, r.InitMode) },
		Equal:         func(a, b size) bool { return a == b },
		Logger:        log,
	}.Run(ctx, func(ctx context.Context, s size) bool {
		if !s.found {
			return true // deleted or not there yet: keep the last size
		}
		r.first.Store(int64(s.first))
		r.total.Store(int64(s.total))
		if s.replicas == sent {
			return true
		}
		select {
		case up <- s.replicas:
			sent = s.replicas
			return true
		case <-ctx.Done():
			return false
		}
	})
}

// size is what Run takes from the StatefulSet.
type size struct {
	found                  bool
	replicas, first, total int
}

// slimSet is the slim StatefulSet kept in Run's informer cache: the
// fields Expected reads.
type slimSet struct {
	metav1.ObjectMeta
	spec appsv1.StatefulSetSpec
}

// slimStatefulSet is Run's informer transform.
func slimStatefulSet(obj any) (any, error) {
	switch o := obj.(type) {
	case *slimSet:
		return o, nil
	case *appsv1.StatefulSet:
		return &slimSet{
			ObjectMeta: metav1.ObjectMeta{Name: o.Name, Namespace: o.Namespace, ResourceVersion: o.ResourceVersion},
			spec: appsv1.StatefulSetSpec{Replicas: o.Spec.Replicas, Ordinals: o.Spec.Ordinals,
				PodManagementPolicy: o.Spec.PodManagementPolicy},
		}, nil
	}
	return nil, fmt.Errorf("statefulset transform: unexpected %T", obj)
}

// sizeOf is the size (Expected) of the StatefulSet called name in the
// store, if there. Pure.
func sizeOf(name string, objs []any, ordinal int, initMode bool) size {
	for _, o := range objs {
		if ss, ok := o.(*slimSet); ok && ss.Name == name {
			s := size{found: true, replicas: Expected(&appsv1.StatefulSet{Spec: ss.spec}, ordinal, initMode), total: 1}
			if ss.spec.Replicas != nil {
				s.total = int(*ss.spec.Replicas)
			}
			if ss.spec.Ordinals != nil {
				s.first = int(ss.spec.Ordinals.Start)
			}
			return s
		}
	}
	return size{}
}

// Lookup reads, once, the owning StatefulSet's name, spec.replicas and first
// ordinal, with the same permissions as Run (get pods; list statefulsets).
func (r *Replicas) Lookup(ctx context.Context) (name string, replicas, first int, err error) {
	pod, err := r.Client.Pods(r.Namespace).Get(ctx, r.Pod, metav1.GetOptions{})
	if err != nil {
		return "", 0, 0, fmt.Errorf("get pod %s/%s: %w", r.Namespace, r.Pod, err)
	}
	if name, err = Owner(&pod.ObjectMeta); err != nil {
		return "", 0, 0, err
	}
	list, err := r.Client.StatefulSets(r.Namespace).List(ctx, metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("metadata.name", name).String(),
	})
	if err != nil {
		return name, 0, 0, fmt.Errorf("list statefulset %s/%s: %w", r.Namespace, name, err)
	}
	for _, ss := range list.Items {
		if ss.Name != name {
			continue
		}
		replicas = Expected(&ss, ordinal.Of(pod.Name, pod.Labels, name), r.InitMode)
		if ss.Spec.Ordinals != nil {
			first = int(ss.Spec.Ordinals.Start)
		}
		return name, replicas, first, nil
	}
	return name, 0, 0, fmt.Errorf("statefulset %s/%s not found", r.Namespace, name)
}
