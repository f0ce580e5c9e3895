package hostsfile

import (
	"slices"
	"strings"
	"testing"
)

// TestExpectedFromJobs: the names a job's pods will have, from the Jobs
// alone, through the name template as the pods source's members would
// give them.
func TestExpectedFromJobs(t *testing.T) {
	ps := Job{Name: "train-ps", Completions: 1, Labels: map[string]string{"app": "train", "role": "ps"}}
	worker := Job{Name: "train-worker", Completions: 3, Labels: map[string]string{"app": "train", "role": "worker"}}
	jobset := func(rjob string, jobIdx string, n int) Job {
		return Job{Name: "js-" + rjob + "-" + jobIdx, Completions: n, Labels: map[string]string{
			"jobset.sigs.k8s.io/jobset-name": "js", "jobset.sigs.k8s.io/replicatedjob-name": rjob, "jobset.sigs.k8s.io/job-index": jobIdx}}
	}
	for _, c := range []struct {
		name, template string
		jobs           []Job
		want           []string
	}{
		{"role label, two Jobs", `{{index .Labels "role"}}-{{.Index}}`, []Job{worker, ps}, []string{"ps-0", "worker-0", "worker-1", "worker-2"}},
		{"default: the pods' host names", "", []Job{ps, worker}, []string{"train-ps-0", "train-worker-0", "train-worker-1", "train-worker-2"}},
		{"ordinal and completion index label", `w{{.Ordinal}}-{{index .Labels "batch.kubernetes.io/job-completion-index"}}`, []Job{worker},
			[]string{"w0-0", "w1-1", "w2-2"}},
		{"job name label", `{{index .Labels "batch.kubernetes.io/job-name"}}-{{.Index}}`, []Job{ps}, []string{"train-ps-0"}},
		{"no labels", "{{.Name}}", []Job{{Name: "solo", Completions: 2}}, []string{"solo-0", "solo-1"}},
		{"JobSet: replicated job, job index, completion index",
			`{{index .Labels "jobset.sigs.k8s.io/replicatedjob-name"}}-{{index .Labels "jobset.sigs.k8s.io/job-index"}}-{{.Index}}`,
			[]Job{jobset("worker", "1", 2), jobset("driver", "0", 1), jobset("worker", "0", 2)},
			[]string{"driver-0-0", "worker-0-0", "worker-0-1", "worker-1-0", "worker-1-1"}},
		{"JobSet: default is the pods' host names", "", []Job{jobset("worker", "0", 1), jobset("worker", "1", 1)},
			[]string{"js-worker-0-0", "js-worker-1-0"}},
		{"the same name twice is one", "{{.Labels.app}}", []Job{ps, worker}, []string{"train"}},
		{"zero completions", "", []Job{{Name: "none", Completions: 0}}, nil},
		{"natural order", `{{.Labels.role}}-{{.Index}}`, []Job{{Name: "w", Completions: 11, Labels: map[string]string{"role": "w"}}},
			[]string{"w-0", "w-1", "w-2", "w-3", "w-4", "w-5", "w-6", "w-7", "w-8", "w-9", "w-10"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			n, err := NewNamer(c.template, nil, "")
			if err != nil {
				t.Fatal(err)
			}
			got, err := n.ExpectedFromJobs(c.jobs)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, c.want) {
				t.Errorf("got %q, want %q", got, c.want)
			}
		})
	}
}

// TestExpectedFromJobsRejects: names that could never be written, and
// more than MaxExpected, are errors naming the Job.
func TestExpectedFromJobsRejects(t *testing.T) {
	for _, c := range []struct {
		name, template string
		jobs           []Job
		want           string
	}{
		{"label missing: empty role", `{{.Labels.role}}-{{.Index}}`, []Job{{Name: "train-ps", Completions: 1}}, `job train-ps index 0: host name "-0"`},
		{"upper case", `{{.Labels.role}}`, []Job{{Name: "a", Completions: 1, Labels: map[string]string{"role": "PS"}}}, `job a index 0: host name "PS"`},
		{"too many", "", []Job{{Name: "a", Completions: MaxExpected}, {Name: "b", Completions: 1}}, "job b: 1 completions: more than 100000"},
		{"negative", "", []Job{{Name: "a", Completions: -1}}, "job a: -1 completions"},
	} {
		t.Run(c.name, func(t *testing.T) {
			n, err := NewNamer(c.template, nil, "")
			if err != nil {
				t.Fatal(err)
			}
			got, err := n.ExpectedFromJobs(c.jobs)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %q, %v; want an error containing %q", got, err, c.want)
			}
		})
	}
}
