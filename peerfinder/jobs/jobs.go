// Package jobs reads the shape of the batch job a pod belongs to, for
// -hosts-expect=auto: the Indexed Jobs whose pods are expected, before any
// of those pods starts. A job is one of
//
//   - a JobSet's Jobs: the pod carries jobset.sigs.k8s.io/jobset-name and
//     every Job labelled with the same value belongs (JobSet labels its
//     Jobs so; its CRD is not read);
//   - several Indexed Jobs joined by a label (-hosts-job-label): every Job
//     of the namespace whose pod template carries the pod's value of that
//     label, e.g. a parameter-server Job and a worker Job both templated
//     with job=train; each Job is one role;
//   - else the pod's own Job alone (its batch.kubernetes.io/job-name label,
//     else job-name, else its controller ownerReference of kind Job).
//
// RBAC: get on pods (this pod) and list on jobs.batch.
package jobs

import (
	"context"
	"errors"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/flockd/flock/internal/kube"
	"github.com/flockd/flock/internal/retry"
	"github.com/flockd/flock/peerfinder/sink/hostsfile"
)

// Label keys read.
const (
	// JobSetNameLabel is set by JobSet on its Jobs and their pods.
	JobSetNameLabel = "jobset.sigs.k8s.io/jobset-name"
	// legacyJobNameLabel is the Job controller's older job-name label.
	legacyJobNameLabel = "job-name"
)

// ErrNotInJob is returned when the pod belongs to no Job.
var ErrNotInJob = errors.New("pod belongs to no Job")

// Query is which Jobs make up the job of one pod. Pure: built from the
// pod's metadata by QueryOf.
type Query struct {
	// Job is the pod's own Job.
	Job string
	// Key and Value join the Jobs: on the Jobs' labels for a JobSet
	// (JobSet true), on their pod templates' labels for -hosts-job-label.
	// Key is "" for the own Job alone.
	Key, Value string
	JobSet     bool
}

// QueryOf returns the Query of the pod with metadata m; jobLabel is
// -hosts-job-label ("" for none). It fails when the pod belongs to no Job
// or lacks jobLabel.
func QueryOf(m *metav1.ObjectMeta, jobLabel string) (Query, error) {
	q := Query{Job: m.Labels[hostsfile.JobNameLabel]}
	if q.Job == "" {
		q.Job = m.Labels[legacyJobNameLabel]
	}
	if ref := metav1.GetControllerOfNoCopy(m); q.Job == "" && ref != nil && ref.Kind == "Job" && ref.APIVersion == "batch/v1" {
		q.Job = ref.Name
	}
	if q.Job == "" {
		return Query{}, fmt.Errorf("pod %s/%s: %w (no %s label, no Job controller)", m.Namespace, m.Name, ErrNotInJob, hostsfile.JobNameLabel)
	}
	if v, ok := m.Labels[JobSetNameLabel]; ok && v != "" {
		q.Key, q.Value, q.JobSet = JobSetNameLabel, v, true
		return q, nil
	}
	if jobLabel != "" {
		v, ok := m.Labels[jobLabel]
		if !ok {
			return Query{}, fmt.Errorf("pod %s/%s has no label %s (-hosts-job-label)", m.Namespace, m.Name, jobLabel)
		}
		q.Key, q.Value = jobLabel, v
	}
	return q, nil
}

// ListOptions narrows the list of Jobs as far as the API server can: by
// label for a JobSet, by name for the own Job alone. Template labels
// cannot be selected on: Select filters those.
func (q Query) ListOptions() metav1.ListOptions {
	switch {
	case q.JobSet:
		return metav1.ListOptions{LabelSelector: labels.Set{q.Key: q.Value}.String()}
	case q.Key == "":
		return metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", q.Job).String()}
	}
	return metav1.ListOptions{}
}

// Select returns the shapes of the Jobs of q among jobs, in the order
// given. The own Job is always one of them; it fails when the own Job is
// missing or a selected Job is not an Indexed Job with completions (its
// pods have no index to name them by).
func (q Query) Select(jobs []kube.SlimJob) ([]hostsfile.Job, error) {
	var out []hostsfile.Job
	own := false
	for i := range jobs {
		j := &jobs[i]
		own = own || j.Name == q.Job
		if !q.joins(j) {
			continue
		}
		if j.Spec.CompletionMode != "Indexed" || j.Spec.Completions == nil {
			return nil, fmt.Errorf("job %s is not an Indexed Job with completions: its pods have no index to expect", j.Name)
		}
		out = append(out, hostsfile.Job{Name: j.Name, Completions: int(*j.Spec.Completions), Labels: j.Spec.Template.Metadata.Labels})
	}
	if !own {
		return nil, fmt.Errorf("job %s of this pod not found", q.Job)
	}
	return out, nil
}

// joins reports whether j is one of q's Jobs.
func (q Query) joins(j *kube.SlimJob) bool {
	switch {
	case j.Name == q.Job:
		return true
	case q.JobSet:
		return j.Labels[q.Key] == q.Value
	case q.Key != "":
		v, ok := j.Spec.Template.Metadata.Labels[q.Key]
		return ok && v == q.Value
	}
	return false
}

// Reader reads the Jobs of this pod's job.
type Reader struct {
	Client    *kube.Client
	Namespace string
	// Pod is this pod's name.
	Pod string
	// JobLabel is -hosts-job-label ("" for none).
	JobLabel string
	// Backoff paces the retries of failed API requests.
	Backoff retry.Backoff
	// OnErr, when not nil, sees each failed request and the pause before
	// the next try.
	OnErr func(err error, retryIn time.Duration)
}

// Read reads this pod, then lists its job's Jobs, retrying API failures
// until ctx ends (then it returns ctx's error). What the pod and the Jobs
// say is not retried: a pod in no Job, or a Job that is not Indexed, is
// an error at once.
func (r Reader) Read(ctx context.Context) (Query, []hostsfile.Job, error) {
	pod, err := kube.OwnPod(ctx, r.Client.Pods(r.Namespace), r.Pod, r.Backoff, r.OnErr)
	if err != nil {
		return Query{}, nil, fmt.Errorf("read pod %s/%s: %w", r.Namespace, r.Pod, err)
	}
	q, err := QueryOf(&pod.ObjectMeta, r.JobLabel)
	if err != nil {
		return Query{}, nil, err
	}
	var list *kube.SlimJobList
	err = retry.Do(ctx, r.Backoff, func(ctx context.Context) error {
		l, err := r.Client.Jobs(r.Namespace).List(ctx, q.ListOptions())
		if err != nil {
			return fmt.Errorf("list jobs.batch in %s: %w", r.Namespace, err)
		}
		list = l
		return nil
	}, r.OnErr)
	if err != nil {
		return q, nil, err
	}
	shapes, err := q.Select(list.Items)
	return q, shapes, err
}
