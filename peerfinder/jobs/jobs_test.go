package jobs

import (
	"errors"
	"slices"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flockd/flock/internal/kube"
	"github.com/flockd/flock/peerfinder/sink/hostsfile"
)

func job(name string, mode string, completions int32, labels, template map[string]string) kube.SlimJob {
	j := kube.SlimJob{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
	j.Spec.CompletionMode = mode
	j.Spec.Completions = &completions
	j.Spec.Template.Metadata.Labels = template
	return j
}

// TestQueryOf: which Jobs a pod's job is made of, from its labels.
func TestQueryOf(t *testing.T) {
	ctrl := true
	for _, c := range []struct {
		name     string
		meta     metav1.ObjectMeta
		jobLabel string
		want     Query
		opts     metav1.ListOptions
	}{
		{"own Job", metav1.ObjectMeta{Labels: map[string]string{"batch.kubernetes.io/job-name": "train-ps"}}, "",
			Query{Job: "train-ps"}, metav1.ListOptions{FieldSelector: "metadata.name=train-ps"}},
		{"older job-name label", metav1.ObjectMeta{Labels: map[string]string{"job-name": "old"}}, "",
			Query{Job: "old"}, metav1.ListOptions{FieldSelector: "metadata.name=old"}},
		{"controller reference", metav1.ObjectMeta{OwnerReferences: []metav1.OwnerReference{
			{APIVersion: "batch/v1", Kind: "Job", Name: "owned", Controller: &ctrl}}}, "",
			Query{Job: "owned"}, metav1.ListOptions{FieldSelector: "metadata.name=owned"}},
		{"joined by a label", metav1.ObjectMeta{Labels: map[string]string{"batch.kubernetes.io/job-name": "train-ps", "flockd.io/job": "train"}},
			"flockd.io/job", Query{Job: "train-ps", Key: "flockd.io/job", Value: "train"}, metav1.ListOptions{}},
		{"JobSet before the label", metav1.ObjectMeta{Labels: map[string]string{"batch.kubernetes.io/job-name": "js-w-0",
			"jobset.sigs.k8s.io/jobset-name": "js", "flockd.io/job": "train"}}, "flockd.io/job",
			Query{Job: "js-w-0", Key: JobSetNameLabel, Value: "js", JobSet: true}, metav1.ListOptions{LabelSelector: "jobset.sigs.k8s.io/jobset-name=js"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			q, err := QueryOf(&c.meta, c.jobLabel)
			if err != nil {
				t.Fatal(err)
			}
			if q != c.want {
				t.Errorf("got %+v, want %+v", q, c.want)
			}
			if o := q.ListOptions(); o.LabelSelector != c.opts.LabelSelector || o.FieldSelector != c.opts.FieldSelector {
				t.Errorf("list options %+v, want %+v", o, c.opts)
			}
		})
	}
	ctrlRS := metav1.ObjectMeta{Name: "web-1", OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "StatefulSet", Name: "web", Controller: &ctrl}}}
	if _, err := QueryOf(&ctrlRS, ""); !errors.Is(err, ErrNotInJob) {
		t.Errorf("StatefulSet pod: got %v, want ErrNotInJob", err)
	}
	noLabel := metav1.ObjectMeta{Name: "p", Labels: map[string]string{"batch.kubernetes.io/job-name": "j"}}
	if _, err := QueryOf(&noLabel, "flockd.io/job"); err == nil || !strings.Contains(err.Error(), "has no label flockd.io/job (-hosts-job-label)") {
		t.Errorf("pod without the join label: got %v", err)
	}
}

// TestSelect: the Jobs of a query among the namespace's, and the names
// they give.
func TestSelect(t *testing.T) {
	train := func(role string) map[string]string { return map[string]string{"flockd.io/job": "train", "role": role} }
	all := []kube.SlimJob{
		job("train-ps", "Indexed", 1, nil, train("ps")),
		job("train-worker", "Indexed", 3, nil, train("worker")),
		job("other-worker", "Indexed", 2, nil, map[string]string{"flockd.io/job": "other", "role": "worker"}),
		job("cron-123", "NonIndexed", 1, nil, map[string]string{"app": "cron"}),
		job("js-driver-0", "Indexed", 1, map[string]string{JobSetNameLabel: "js"}, map[string]string{"role": "driver"}),
		job("js-worker-0", "Indexed", 2, map[string]string{JobSetNameLabel: "js"}, map[string]string{"role": "worker"}),
		job("js2-worker-0", "Indexed", 5, map[string]string{JobSetNameLabel: "js2"}, map[string]string{"role": "worker"}),
	}
	namer, err := hostsfile.NewNamer(`{{.Labels.role}}-{{.Index}}`, nil, "")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		q    Query
		want []string
	}{
		{"own Job", Query{Job: "train-worker"}, []string{"worker-0", "worker-1", "worker-2"}},
		{"joined by a template label", Query{Job: "train-ps", Key: "flockd.io/job", Value: "train"}, []string{"ps-0", "worker-0", "worker-1", "worker-2"}},
		{"JobSet", Query{Job: "js-worker-0", Key: JobSetNameLabel, Value: "js", JobSet: true}, []string{"driver-0", "worker-0", "worker-1"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			shapes, err := c.q.Select(all)
			if err != nil {
				t.Fatal(err)
			}
			got, err := namer.ExpectedFromJobs(shapes)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, c.want) {
				t.Errorf("got %q, want %q", got, c.want)
			}
		})
	}
	for _, c := range []struct {
		name string
		q    Query
		want string
	}{
		{"own Job missing", Query{Job: "gone"}, "job gone of this pod not found"},
		{"own Job not Indexed", Query{Job: "cron-123"}, "job cron-123 is not an Indexed Job"},
		{"a joined Job not Indexed", Query{Job: "train-ps", Key: "app", Value: "cron"}, "job cron-123 is not an Indexed Job"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got, err := c.q.Select(all); err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, %v; want an error containing %q", got, err, c.want)
			}
		})
	}
}
