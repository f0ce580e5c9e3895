package hostsfile

import (
	"fmt"
	"maps"
	"strconv"

	"github.com/flockd/flock/internal/ordinal"
	"github.com/flockd/flock/peerfinder/peer"
)

// JobNameLabel is the label the Job controller sets on its pods (and on
// the pod template) to the Job's name.
const JobNameLabel = "batch.kubernetes.io/job-name"

// Job is the shape of one Indexed Job whose pods are expected
// (-hosts-expect=auto): Completions pods, indexes 0 to Completions-1.
type Job struct {
	// Name is the Job's name: an Indexed Job's pod of index i has the host
	// name "<Name>-<i>".
	Name string
	// Completions is spec.completions.
	Completions int
	// Labels are the labels of the Job's pod template.
	Labels map[string]string
}

// ExpectedFromJobs returns the host names n gives the pods of jobs before
// any of them exists: for each Job and index i, the member a pod of that
// index will be, as the pods source sees it (Name "<job>-<i>", Ordinal i,
// Labels the template's plus the Job controller's job-name and
// completion-index labels). So the name template decides the role, e.g.
// {{index .Labels "role"}}-{{.Index}} gives ps-0, worker-0, ...; the
// default {{.Name}} gives <job>-<i>. A template over .FQDN, .Pod, .Node
// or .Zone cannot be known before the pod exists: what it gives then is
// what is expected. The result is sorted (naturally) and free of
// duplicates, at most MaxExpected names; an invalid name is an error.
func (n *Namer) ExpectedFromJobs(jobs []Job) ([]string, error) {
	var names []string
	for _, j := range jobs {
		if j.Completions < 0 || j.Completions > MaxExpected-len(names) {
			return nil, fmt.Errorf("job %s: %d completions: more than %d expected names", j.Name, j.Completions, MaxExpected)
		}
		for i := range j.Completions {
			idx := strconv.Itoa(i)
			labels := maps.Clone(j.Labels)
			if labels == nil {
				labels = map[string]string{}
			}
			labels[JobNameLabel] = j.Name
			labels[ordinal.JobCompletionIndexLabel] = idx
			name, _, err := n.names(peer.Peer{Name: j.Name + "-" + idx, Ordinal: i, Labels: labels})
			if err != nil {
				return nil, fmt.Errorf("job %s index %d: %w", j.Name, i, err)
			}
			if err := ValidName(name); err != nil {
				return nil, fmt.Errorf("job %s index %d: %w", j.Name, i, err)
			}
			names = append(names, name)
		}
	}
	return sortNames(names), nil
}
