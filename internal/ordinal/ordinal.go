// Package ordinal is flock's one ordinal rule: a member's index from its
// pod's labels (the StatefulSet pod-index label, an Indexed Job's
// completion index) or, failing those, from the StatefulSet naming rule.
// peer-finder's sources and the Flock controller both use it.
package ordinal

import (
	"net"
	"strconv"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
)

// Label keys that carry a member's index, from k8s.io/api.
const (
	// PodIndexLabel is set by the StatefulSet controller on its pods
	// (Kubernetes 1.28+).
	PodIndexLabel = appsv1.PodIndexLabel
	// JobCompletionIndexLabel is set by the Job controller on the pods of an
	// Indexed Job (a label since Kubernetes 1.28; the annotation of the
	// same name is older). Spelled out: k8s.io/api/batch/v1 would link
	// Jobs' types and scheduling/v1alpha3 (0.7 MB) for this one key;
	// TestJobCompletionIndexLabel compares it with batchv1's constant.
	JobCompletionIndexLabel = "batch.kubernetes.io/job-completion-index"
)

// Of is the one ordinal rule of flock, for a pod whose labels are
// known: the pod-index label, else the Job completion index label, else,
// on a pod controlled by the StatefulSet named statefulSet, the StatefulSet
// naming rule (the pod is "<statefulSet>-<N>"). statefulSet is "" for a pod
// without a StatefulSet controller, whose name says nothing. -1 when no
// rule gives an ordinal. N is decimal without leading zeros and fits an
// int32, as the StatefulSet controller writes it.
func Of(name string, labels map[string]string, statefulSet string) int {
	for _, k := range []string{PodIndexLabel, JobCompletionIndexLabel} {
		if v, ok := labels[k]; ok {
			if n := parse(v); n >= 0 {
				return n
			}
		}
	}
	if statefulSet == "" {
		return -1
	}
	digits, ok := strings.CutPrefix(name, statefulSet+"-")
	if !ok {
		return -1
	}
	return parse(digits)
}

// FromName is the StatefulSet naming rule for sources that see only
// a name (DNS, EndpointSlices): N for a name "<prefix>-N" whose prefix holds
// a letter, -1 otherwise. Dashed IP addresses, which CoreDNS and
// EndpointSlices use for endpoints without a host name (e.g. "10-1-2-3",
// "fd00--a-1"), give -1.
func FromName(name string) int {
	i := strings.LastIndexByte(name, '-')
	if i <= 0 || !strings.ContainsFunc(name[:i], isLetter) {
		return -1
	}
	if net.ParseIP(strings.ReplaceAll(name, "-", ":")) != nil {
		return -1 // dashed IPv6 such as "fd00--a-1"
	}
	return parse(name[i+1:])
}

// parse parses a decimal ordinal without sign or leading zeros
// that fits an int32; -1 otherwise.
func parse(s string) int {
	if s == "" || len(s) > 1 && s[0] == '0' || strings.Trim(s, "0123456789") != "" {
		return -1
	}
	n, err := strconv.ParseInt(s, 10, 32)
	if err != nil {
		return -1
	}
	return int(n)
}

func isLetter(r rune) bool { return r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' }
