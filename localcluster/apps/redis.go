package apps

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// RedisContainer is the container redis-cli runs in.
const RedisContainer = "redis"

// RedisView is one pod's Redis's view of its replication (redis-cli info
// replication).
type RedisView struct {
	Pod string
	// Role is "master" or "slave", "" when Redis did not answer.
	Role string
	// Master is a replica's primary, by pod name (master_host's first
	// label); LinkUp is master_link_status:up.
	Master string
	LinkUp bool
	// Replicas are a primary's connected replicas by pod name (the first
	// label of each address they announce), sorted.
	Replicas []string
	// ReplID is master_replid: a replica in sync has its primary's.
	ReplID string
	// Err says why the view is incomplete.
	Err string
}

// ParseRedisInfo reads the output of "info replication".
func ParseRedisInfo(pod, out string) RedisView {
	v := RedisView{Pod: pod}
	connected := -1
	for line := range strings.Lines(out) {
		k, val, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok {
			continue
		}
		switch {
		case k == "role":
			v.Role = val
		case k == "master_host":
			v.Master, _, _ = strings.Cut(val, ".")
		case k == "master_link_status":
			v.LinkUp = val == "up"
		case k == "master_replid":
			v.ReplID = val
		case k == "connected_slaves":
			connected, _ = strconv.Atoi(val)
		case strings.HasPrefix(k, "slave") && strings.Contains(val, "ip="):
			for _, kv := range strings.Split(val, ",") {
				if ip, ok := strings.CutPrefix(kv, "ip="); ok {
					name, _, _ := strings.Cut(ip, ".")
					v.Replicas = append(v.Replicas, name)
				}
			}
		}
	}
	slices.Sort(v.Replicas)
	switch {
	case v.Role != "master" && v.Role != "slave":
		v.Err = fmt.Sprintf("no role in %q", out)
		v.Role = ""
	case v.Role == "master" && connected != len(v.Replicas):
		v.Err = fmt.Sprintf("connected_slaves:%d but %d listed", connected, len(v.Replicas))
	}
	return v
}

// ReadRedis asks pod's own Redis for its replication, with redis-cli.
func ReadRedis(ctx context.Context, ex Exec, ns, pod string) RedisView {
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	out, err := ex(ctx, ns, pod, RedisContainer, "redis-cli", "-e", "info", "replication")
	if err != nil {
		return RedisView{Pod: pod, Err: fmt.Sprintf("info replication: %v: %s", err, strings.TrimSpace(out))}
	}
	return ParseRedisInfo(pod, out)
}

// ReadRedisAll reads every pod's view, in parallel.
func ReadRedisAll(ctx context.Context, ex Exec, ns string, pods []string) []RedisView {
	return eachPod(pods, func(p string) RedisView { return ReadRedis(ctx, ex, ns, p) })
}

// RedisVerdict is what the views say about the replication.
type RedisVerdict struct {
	// Healthy: every pod answered; one primary, whose connected replicas
	// are exactly the other pods; each of them a replica of it, its link
	// up, with the primary's replication id.
	Healthy bool
	// Primaries are the pods that say they are a primary; more than one is
	// a split brain.
	Primaries []string
	// Detail says what is wrong, in words.
	Detail string
}

// Split reports more than one primary.
func (v RedisVerdict) Split() bool { return len(v.Primaries) > 1 }

// Primary is the one primary, or "".
func (v RedisVerdict) Primary() string {
	if len(v.Primaries) == 1 {
		return v.Primaries[0]
	}
	return ""
}

// JudgeRedis judges views of the StatefulSet's pods (names).
func JudgeRedis(views []RedisView, pods []string) RedisVerdict {
	var v RedisVerdict
	var problems []string
	byPod := map[string]RedisView{}
	for _, r := range views {
		byPod[r.Pod] = r
		if r.Role == "master" {
			v.Primaries = append(v.Primaries, r.Pod)
		}
		if r.Err != "" {
			problems = append(problems, fmt.Sprintf("%s: %s", r.Pod, r.Err))
		}
	}
	slices.Sort(v.Primaries)
	switch len(v.Primaries) {
	case 0:
		problems = append(problems, "no primary")
	case 1:
		p := byPod[v.Primaries[0]]
		want := slices.DeleteFunc(slices.Sorted(slices.Values(pods)), func(s string) bool { return s == p.Pod })
		if !slices.Equal(p.Replicas, want) {
			problems = append(problems, fmt.Sprintf("primary %s: replicas %q, want %q", p.Pod, p.Replicas, want))
		}
		for _, r := range views {
			switch {
			case r.Role != "slave" || r.Pod == p.Pod:
			case r.Master != p.Pod:
				problems = append(problems, fmt.Sprintf("%s: a replica of %q, not of the primary %s", r.Pod, r.Master, p.Pod))
			case !r.LinkUp:
				problems = append(problems, fmt.Sprintf("%s: link to %s down", r.Pod, p.Pod))
			case r.ReplID != p.ReplID:
				problems = append(problems, fmt.Sprintf("%s: replication id %s, the primary's %s", r.Pod, r.ReplID, p.ReplID))
			}
		}
	default:
		problems = append(problems, fmt.Sprintf("%d primaries %q", len(v.Primaries), v.Primaries))
	}
	if len(views) != len(pods) {
		problems = append(problems, fmt.Sprintf("%d views of %d pods", len(views), len(pods)))
	}
	for _, p := range pods {
		if _, ok := byPod[p]; !ok {
			problems = append(problems, fmt.Sprintf("no view of %s", p))
		}
	}
	v.Healthy = len(problems) == 0
	v.Detail = strings.Join(problems, "; ")
	return v
}

// RedisProgress scores how far views of a bootstrapping replication got
// (see Observation.Progress): per pod, one point for answering with a
// role, one for being a primary or a replica whose link is up; plus the
// connected replicas of the primary that has most. It is pure.
func RedisProgress(views []RedisView) int {
	score, most := 0, 0
	for _, r := range views {
		if r.Role != "" {
			score++
		}
		if r.Role == "master" || r.Role == "slave" && r.LinkUp {
			score++
		}
		if r.Role == "master" {
			most = max(most, len(r.Replicas))
		}
	}
	return score + most
}
