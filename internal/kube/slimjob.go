package kube

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// JobLister lists batch/v1 Jobs as SlimJobs (Client.Jobs).
type JobLister interface {
	List(ctx context.Context, opts metav1.ListOptions) (*SlimJobList, error)
}

// SlimJob is the part of a batch/v1 Job that peer-finder reads for
// -hosts-expect=auto: its name, labels and the shape of its pods. It is
// decoded from JSON by reflection (Client.Jobs asks for JSON), so
// k8s.io/api/batch/v1 (Jobs' types and, through them,
// scheduling/v1alpha3: 0.7 MB) is not linked. Field names and JSON keys
// are those of batchv1.Job.
type SlimJob struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              SlimJobSpec `json:"spec,omitempty"`
}

// SlimJobSpec is the part of batchv1.JobSpec in a SlimJob.
type SlimJobSpec struct {
	Completions *int32 `json:"completions,omitempty"`
	// CompletionMode is "Indexed" or "NonIndexed" (the default).
	CompletionMode string             `json:"completionMode,omitempty"`
	Template       SlimJobPodTemplate `json:"template,omitempty"`
}

// SlimJobPodTemplate is the metadata of a Job's pod template.
type SlimJobPodTemplate struct {
	Metadata SlimJobTemplateMeta `json:"metadata,omitempty"`
}

// SlimJobTemplateMeta is the part of the template's metadata in a SlimJob.
type SlimJobTemplateMeta struct {
	Labels map[string]string `json:"labels,omitempty"`
}

// SlimJobList is a list of SlimJobs (a JobList on the wire).
type SlimJobList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []SlimJob `json:"items"`
}

// DeepCopyObject implements runtime.Object.
func (j *SlimJob) DeepCopyObject() runtime.Object {
	if j == nil {
		return nil
	}
	out := &SlimJob{TypeMeta: j.TypeMeta, Spec: j.Spec}
	j.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	if j.Spec.Completions != nil {
		c := *j.Spec.Completions
		out.Spec.Completions = &c
	}
	if l := j.Spec.Template.Metadata.Labels; l != nil {
		out.Spec.Template.Metadata.Labels = make(map[string]string, len(l))
		for k, v := range l {
			out.Spec.Template.Metadata.Labels[k] = v
		}
	}
	return out
}

// DeepCopyObject implements runtime.Object.
func (l *SlimJobList) DeepCopyObject() runtime.Object {
	if l == nil {
		return nil
	}
	out := &SlimJobList{TypeMeta: l.TypeMeta}
	l.ListMeta.DeepCopyInto(&out.ListMeta)
	if l.Items != nil {
		out.Items = make([]SlimJob, len(l.Items))
		for i := range l.Items {
			out.Items[i] = *l.Items[i].DeepCopyObject().(*SlimJob)
		}
	}
	return out
}
