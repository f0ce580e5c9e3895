package peerfinder

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/flockd/flock/internal/retry"
	"github.com/flockd/flock/peerfinder/config"
	"github.com/flockd/flock/peerfinder/engine"
	"github.com/flockd/flock/peerfinder/jobs"
	"github.com/flockd/flock/peerfinder/sink/hostsfile"
)

// expectFromJobs sets cfg.Sinks.Expected for -hosts-expect=auto: the host
// names the pods of this pod's Indexed Jobs will have (package jobs, then
// hostsfile.Namer.ExpectedFromJobs), read once, before the pipeline is
// built, so that the first write lists every name. A failing API request
// is retried (logged once per distinct error) until ctx ends or
// -bootstrap-timeout passes (then ErrBootstrapTimeout); a pod in no Job
// or a Job without indexes is an error at once.
func expectFromJobs(ctx context.Context, cfg *config.Config, kc *kubeClient, log *slog.Logger) error {
	s := &cfg.Sinks
	client, err := kc.Get()
	if err != nil {
		return err
	}
	if cfg.Bootstrap.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeoutCause(ctx, cfg.Bootstrap.Timeout, engine.ErrBootstrapTimeout)
		defer cancel()
	}
	var lastErr string
	r := jobs.Reader{
		Client: client, Namespace: cfg.Namespace, Pod: cfg.Bootstrap.PodName, JobLabel: s.JobLabel,
		Backoff: retry.Backoff{Min: time.Second, Max: 30 * time.Second},
		OnErr: func(err error, retryIn time.Duration) {
			if msg := err.Error(); msg != lastErr {
				lastErr = msg
				log.Error("cannot read the job for -hosts-expect=auto, retrying", "pod", cfg.Bootstrap.PodName,
					"namespace", cfg.Namespace, "forbidden", apierrors.IsForbidden(err), "retry_in", retryIn, "err", err)
			}
		},
	}
	q, shapes, err := r.Read(ctx)
	if cause := context.Cause(ctx); cause != nil {
		if errors.Is(cause, engine.ErrBootstrapTimeout) {
			return fmt.Errorf("read the job for -hosts-expect=auto: %w", cause)
		}
		log.Info("stopping", "cause", cause)
		if deliveryIsTheOutcome(cfg) {
			return errNotDelivered
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("-hosts-expect=auto: %w", err)
	}
	namer, err := hostsfile.NewNamer(s.NameTemplate, nil, s.IndexLabel)
	if err != nil {
		return &config.UsageError{Flag: "hosts-name-template", Err: err}
	}
	if s.Expected, err = namer.ExpectedFromJobs(shapes); err != nil {
		return fmt.Errorf("-hosts-expect=auto: %w", err)
	}
	names := make([]string, len(shapes))
	for i, j := range shapes {
		names[i] = j.Name
	}
	log.Info("expected names from the job", "job", q.Job, "joined_by", q.Key, "value", q.Value,
		"jobs", names, "expected", len(s.Expected))
	return nil
}
