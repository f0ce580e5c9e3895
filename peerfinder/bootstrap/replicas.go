package bootstrap

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/tools/cache"

	"github.com/flockd/flock/internal/kube"
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
	// RetryMin and RetryMax bound the backoff while the pod cannot be read.
	// Defaults: 1s and 30s.
	RetryMin, RetryMax time.Duration
	// InitMode is true when the one delivery is awaited in an init
	// container: then, for an OrderedReady StatefulSet, the expected size
	// is this member and the ordinals below it (see Expected).
	InitMode bool

	first atomic.Int64
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

// podOrdinal is a StatefulSet pod's ordinal: its pod-index label, else the
// number after the StatefulSet's name; -1 when neither says.
func podOrdinal(pod *metav1.ObjectMeta, set string) int {
	v, ok := pod.Labels[appsv1.PodIndexLabel]
	if !ok {
		v, ok = strings.CutPrefix(pod.Name, set+"-")
	}
	if i, err := strconv.Atoi(v); ok && err == nil && i >= 0 {
		return i
	}
	return -1
}

// FirstOrdinal returns the StatefulSet's first ordinal (spec.ordinals.start),
// 0 until the StatefulSet was read.
func (r *Replicas) FirstOrdinal() int { return int(r.first.Load()) }

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

// Run resolves the owner, retrying with backoff while the pod cannot be read
// (a failure is logged once per distinct error), then sends spec.replicas
// on up whenever it changes. It returns ErrNoStatefulSet (wrapped) when the
// pod has no StatefulSet controller.
func (r *Replicas) Run(ctx context.Context, up chan<- int) error {
	log := r.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	lo, hi := r.RetryMin, r.RetryMax
	if lo <= 0 {
		lo = time.Second
	}
	if hi <= 0 {
		hi = 30 * time.Second
	}
	var name string
	var lastErr string
	for wait := lo; ; wait = min(2*wait, hi) {
		pod, err := r.Client.Pods(r.Namespace).Get(ctx, r.Pod, metav1.GetOptions{})
		if err == nil {
			if name, err = Owner(&pod.ObjectMeta); err != nil {
				return err
			}
			r.ordinal = podOrdinal(&pod.ObjectMeta, name)
			break
		}
		if ctx.Err() != nil {
			return nil
		}
		if msg := err.Error(); msg != lastErr {
			lastErr = msg
			log.Error("cannot read own pod for -expect=auto, retrying", "pod", r.Pod, "namespace", r.Namespace,
				"forbidden", apierrors.IsForbidden(err), "retry_in", wait, "err", err)
		}
		select {
		case <-time.After(wait):
		case <-ctx.Done():
			return nil
		}
	}
	r.owner.Store(&name)
	log.Info("expected size follows statefulset", "statefulset", name)

	byName := fields.OneTermEqualSelector("metadata.name", name).String()
	lw := cache.ToListWatcherWithWatchListSemantics(
		kube.SelectedListWatch(r.Client.StatefulSets(r.Namespace), "", byName),
		r.Client) // fake clients opt out of streaming lists this way
	changed := make(chan struct{}, 1)
	notify := func(any) {
		select {
		case changed <- struct{}{}:
		default:
		}
	}
	inf := cache.NewSharedIndexInformer(lw, &appsv1.StatefulSet{}, 0, cache.Indexers{})
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    notify,
		UpdateFunc: func(_, o any) { notify(o) },
		DeleteFunc: notify,
	}); err != nil {
		return fmt.Errorf("statefulset informer: %w", err)
	}
	var lastWatchErr string
	if err := inf.SetWatchErrorHandlerWithContext(func(_ context.Context, _ *cache.Reflector, err error) {
		if msg := err.Error(); msg != lastWatchErr {
			lastWatchErr = msg
			log.Error("cannot watch statefulset for -expect=auto, retrying", "statefulset", name,
				"forbidden", apierrors.IsForbidden(err), "err", err)
		}
	}); err != nil {
		return fmt.Errorf("statefulset informer: %w", err)
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Go(func() { inf.RunWithContext(ctx) })

	sent := -1
	for {
		select {
		case <-changed:
		case <-ctx.Done():
			return nil
		}
		obj, ok, err := inf.GetStore().GetByKey(r.Namespace + "/" + name)
		if err != nil || !ok {
			continue // deleted: keep the last size
		}
		ss := obj.(*appsv1.StatefulSet)
		n := Expected(ss, r.ordinal, r.InitMode)
		if ss.Spec.Ordinals != nil {
			r.first.Store(int64(ss.Spec.Ordinals.Start))
		}
		if n == sent {
			continue
		}
		select {
		case up <- n:
			sent = n
		case <-ctx.Done():
			return nil
		}
	}
}

// Lookup reads, once, the owning StatefulSet's name, spec.replicas and first
// ordinal, with the same permissions as Run (get pods; list statefulsets).
// Diagnose mode uses it.
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
		replicas = Expected(&ss, podOrdinal(&pod.ObjectMeta, name), r.InitMode)
		if ss.Spec.Ordinals != nil {
			first = int(ss.Spec.Ordinals.Start)
		}
		return name, replicas, first, nil
	}
	return name, 0, 0, fmt.Errorf("statefulset %s/%s not found", r.Namespace, name)
}
