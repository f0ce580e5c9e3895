package controller

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/client-go/tools/record"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	flockv1 "github.com/flockd/flock/api/v1alpha1"
	"github.com/flockd/flock/internal/version"
)

// ManagerOptions configures NewManager.
type ManagerOptions struct {
	// MetricsAddr is where Prometheus metrics are served; "0" disables.
	MetricsAddr string
	// MetricsSecure serves metrics over HTTPS (a self-signed certificate)
	// to clients that authenticate with a Kubernetes token and are allowed
	// "get" on the non-resource URL /metrics (a TokenReview and a
	// SubjectAccessReview per client, cached). Without it, metrics are
	// plain HTTP for anyone who reaches MetricsAddr.
	MetricsSecure bool
	// ProbeAddr is where /healthz and /readyz are served; "" or "0" disables.
	ProbeAddr string
	// LeaderElection makes only one replica reconcile at a time.
	LeaderElection bool
	// LeaderElectionNamespace holds the Lease; required out of cluster.
	LeaderElectionNamespace string
	// LeaseDuration, RenewDeadline and RetryPeriod tune leader election;
	// zero keeps controller-runtime's defaults (15s, 10s, 2s). A follower
	// takes over at the latest LeaseDuration after the leader stops renewing
	// (at once when the leader releases the Lease on a clean stop).
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
	// Logger is the manager's logger.
	Logger logr.Logger
	// Namespace, if set, limits the controller to the Flocks (and the
	// namespaced objects) of that namespace.
	Namespace string
	// AllowedStoragePaths, if not nil, are the host directories NodePinned
	// Flocks may keep data in (Reconciler.AllowedStoragePaths).
	AllowedStoragePaths []string
	// SkipNameValidation allows several managers, one after another, in
	// one process (tests); controller names must otherwise be unique.
	SkipNameValidation bool
	// Reconciled, if set, is told of each reconcile of a Flock
	// (Reconciler.Reconciled); tests wait on it.
	Reconciled func(flock types.NamespacedName, started time.Time)
}

// leaderElectionID names the Lease replicas compete for.
const leaderElectionID = "flock-controller.flockd.io"

// Scheme returns a scheme with the built-in types and flockd.io/v1alpha1.
func Scheme() (*runtime.Scheme, error) {
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		return nil, fmt.Errorf("add client-go types: %w", err)
	}
	if err := flockv1.AddToScheme(s); err != nil {
		return nil, fmt.Errorf("add flockd.io types: %w", err)
	}
	return s, nil
}

// NewManager returns a manager running the Flock controller, with health
// checks, metrics and leader election as configured. Start runs it.
func NewManager(cfg *rest.Config, o ManagerOptions) (ctrl.Manager, error) {
	s, err := Scheme()
	if err != nil {
		return nil, err
	}
	byObject := map[client.Object]cache.ByObject{}
	for obj, sel := range CacheSelectors() {
		byObject[obj] = cache.ByObject{Label: sel}
	}
	cacheOpts := cache.Options{ByObject: byObject}
	if o.Namespace != "" {
		cacheOpts.DefaultNamespaces = map[string]cache.Config{o.Namespace: {}}
	}
	probe := o.ProbeAddr
	if probe == "" {
		probe = "0"
	}
	// The lock is made here, not by controller-runtime, so that the
	// reconciler knows the identity it checks the Lease for.
	var lock resourcelock.Interface
	var leader func(context.Context) error
	var events record.EventBroadcaster
	if o.LeaderElection {
		ns, err := leaderNamespace(o.LeaderElectionNamespace)
		if err != nil {
			return nil, err
		}
		id, err := leaderIdentity(string(uuid.NewUUID()))
		if err != nil {
			return nil, err
		}
		lcfg := rest.CopyConfig(cfg)
		lcfg = rest.AddUserAgent(lcfg, "leader-election")
		// A hung request must not outlast the renew deadline (as controller-runtime does).
		lcfg.Timeout = max(cmp.Or(o.RenewDeadline, 10*time.Second)/2, time.Second)
		cs, err := kubernetes.NewForConfig(lcfg)
		if err != nil {
			return nil, fmt.Errorf("leader election client: %w", err)
		}
		events = record.NewBroadcaster()
		events.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: cs.CoreV1().Events("")})
		lock, err = resourcelock.New(resourcelock.LeasesResourceLock, ns, leaderElectionID, cs.CoreV1(), cs.CoordinationV1(), resourcelock.ResourceLockConfig{
			Identity:      id,
			EventRecorder: events.NewRecorder(s, corev1.EventSource{Component: id}),
		})
		if err != nil {
			events.Shutdown()
			return nil, fmt.Errorf("leader election lock: %w", err)
		}
		leader = LeaderCheck(cs.CoordinationV1(), ns, leaderElectionID, id, time.Now)
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                              s,
		Logger:                              o.Logger,
		Metrics:                             metricsOptions(o),
		HealthProbeBindAddress:              probe,
		LeaderElection:                      o.LeaderElection,
		LeaderElectionID:                    leaderElectionID,
		LeaderElectionNamespace:             o.LeaderElectionNamespace,
		LeaderElectionReleaseOnCancel:       true,
		LeaderElectionResourceLockInterface: lock,
		LeaseDuration:                       nonZero(o.LeaseDuration),
		RenewDeadline:                       nonZero(o.RenewDeadline),
		RetryPeriod:                         nonZero(o.RetryPeriod),
		GracefulShutdownTimeout:             ptrTo(10 * time.Second),
		Cache:                               cacheOpts,
		Controller:                          config.Controller{SkipNameValidation: &o.SkipNameValidation},
	})
	if err != nil {
		if events != nil {
			events.Shutdown()
		}
		return nil, fmt.Errorf("new manager: %w", err)
	}

	// controller-runtime's registry is global: a second manager in one
	// process (tests) finds the gauge registered already.
	if err := metrics.Registry.Register(version.NewCollector()); err != nil && !errors.As(err, new(prometheus.AlreadyRegisteredError)) {
		return nil, fmt.Errorf("register flock_build_info: %w", err)
	}
	if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return nil, fmt.Errorf("add healthz: %w", err)
	}
	if err := mgr.AddReadyzCheck("cache", func(req *http.Request) error {
		if !mgr.GetCache().WaitForCacheSync(req.Context()) {
			return errors.New("cache not synced")
		}
		return nil
	}); err != nil {
		return nil, fmt.Errorf("add readyz: %w", err)
	}
	members, err := sharedMemberMetrics()
	if err != nil {
		return nil, err
	}
	r := &Reconciler{
		Metrics:   members,
		Client:    mgr.GetClient(),
		APIReader: mgr.GetAPIReader(),
		Recorder:  mgr.GetEventRecorder(FieldOwner),
		Namespace: o.Namespace,
		Leader:    leader,

		AllowedStoragePaths: o.AllowedStoragePaths,
		Reconciled:          o.Reconciled,
	}
	if err := r.SetupWithManager(mgr); err != nil {
		if events != nil {
			events.Shutdown()
		}
		return nil, fmt.Errorf("setup flock controller: %w", err)
	}
	if events != nil {
		return &eventsManager{Manager: mgr, events: events}, nil
	}
	return mgr, nil
}

// eventsManager stops the leader elector's event broadcaster when Start
// returns, after the elector has released the Lease (and recorded so).
type eventsManager struct {
	ctrl.Manager
	events record.EventBroadcaster
}

func (m *eventsManager) Start(ctx context.Context) error {
	defer m.events.Shutdown()
	return m.Manager.Start(ctx)
}

// metricsOptions serves /metrics as o says: with authentication and
// authorization through the API server (controller-runtime's filters) when
// MetricsSecure, plain otherwise.
func metricsOptions(o ManagerOptions) metricsserver.Options {
	m := metricsserver.Options{BindAddress: o.MetricsAddr}
	if o.MetricsSecure {
		m.SecureServing = true
		m.FilterProvider = filters.WithAuthenticationAndAuthorization
	}
	return m
}

func ptrTo[T any](v T) *T { return &v }

// nonZero returns a pointer to d, or nil (the default) when d is zero.
func nonZero(d time.Duration) *time.Duration {
	if d == 0 {
		return nil
	}
	return &d
}
