package config

import (
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
)

// expectAuto is the -hosts-expect value that reads the expected names from
// the pod's Jobs.
const expectAuto = "auto"

// completeExpectAuto validates -hosts-expect=auto and -hosts-job-label.
func (c *Config) completeExpectAuto(env Env) error {
	s := &c.Sinks
	spec := strings.TrimSpace(s.ExpectSpec)
	s.ExpectAuto = spec == expectAuto
	switch {
	case !s.ExpectAuto && slices.ContainsFunc(strings.Split(spec, ","), func(item string) bool { return strings.TrimSpace(item) == expectAuto }):
		return usage("hosts-expect", "auto stands alone, not in a list: %q", s.ExpectSpec)
	case !s.ExpectAuto && s.JobLabel != "":
		return usage("hosts-job-label", "needs -hosts-expect=auto")
	case !s.ExpectAuto:
		return nil
	case !slices.Contains(c.Kube.Sources, SourcePods):
		return usage("hosts-expect", "auto needs -source=pods: the expected names are those of the pods of this pod's Jobs")
	case s.HostsFile == "":
		return usage("hosts-expect", "auto needs -hosts-file")
	case env.Getenv("POD_NAME") == "":
		return usage("hosts-expect", "auto needs $POD_NAME (fieldRef metadata.name) to read this pod: an Indexed Job's pod host name is not its pod name")
	}
	if s.JobLabel != "" {
		if errs := validation.IsQualifiedName(s.JobLabel); len(errs) > 0 {
			return usage("hosts-job-label", "%q is not a label key: %s", s.JobLabel, strings.Join(errs, "; "))
		}
	}
	return nil
}
