package apps

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"
)

// ZookeeperView is one pod's ZooKeeper server's view of its ensemble, by
// the four-letter words srvr and conf over busybox nc, and the marker znode
// read with zkCli.sh.
type ZookeeperView struct {
	Pod string
	// Mode is srvr's: leader, follower, observer; "" when not serving.
	Mode string
	// Servers are the server lines of the configuration the server runs
	// (conf's membership), sorted; Version is the configuration's version.
	Servers []string
	Version string
	// Marker is the data of the marker znode (MarkerPrefix...), when asked
	// for and present.
	Marker string
	// Err says why the view is incomplete.
	Err string
}

// MarkerPrefix starts the data of a marker znode, which names one
// ensemble: a test writes it once the ensemble formed and reads it on every
// member later (a second ensemble lacks it).
const MarkerPrefix = "marker="

// ZookeeperContainer is the container the ZooKeeper tools run in.
const ZookeeperContainer = "zk"

// ReadZookeeper asks pod's own ZooKeeper (127.0.0.1:2181) for its mode and
// configuration, and with marker != "" (a znode path) for that znode's data.
func ReadZookeeper(ctx context.Context, ex Exec, ns, pod, container, marker string) ZookeeperView {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	out, err := ex(ctx, ns, pod, container, "sh", "-c", "echo srvr | nc 127.0.0.1 2181; echo ---; echo conf | nc 127.0.0.1 2181")
	v := ParseZookeeper(pod, out)
	if err != nil && v.Err == "" {
		v.Err = fmt.Sprintf("srvr, conf: %v: %s", err, strings.TrimSpace(out))
	}
	if marker == "" || v.Err != "" {
		return v
	}
	// zkCli prints its watcher's events around the data: the data is the
	// line that starts with MarkerPrefix.
	out, err = ex(ctx, ns, pod, container, "sh", "-c", `timeout 25 zkCli.sh -server 127.0.0.1:2181 get "$1" 2>/dev/null | grep "^$2"`, "sh", marker, MarkerPrefix)
	if err != nil {
		v.Err = fmt.Sprintf("get %s: %v: %s", marker, err, strings.TrimSpace(out))
		return v
	}
	v.Marker = strings.TrimSpace(out)
	return v
}

// ParseZookeeper reads the output of srvr, a line "---", and conf.
func ParseZookeeper(pod, out string) ZookeeperView {
	v := ZookeeperView{Pod: pod}
	srvr, conf, _ := strings.Cut(out, "---\n")
	for line := range strings.Lines(srvr) {
		if m, ok := strings.CutPrefix(strings.TrimSpace(line), "Mode: "); ok {
			v.Mode = m
		}
	}
	members := false
	for line := range strings.Lines(conf) {
		line = strings.TrimSpace(line)
		switch {
		case strings.HasPrefix(line, "membership:"):
			members = true
		case members && strings.HasPrefix(line, "server."):
			v.Servers = append(v.Servers, line)
		case members && strings.HasPrefix(line, "version="):
			v.Version = strings.TrimPrefix(line, "version=")
		}
	}
	slices.Sort(v.Servers)
	if v.Mode == "" {
		v.Err = "not serving: " + strings.TrimSpace(srvr)
	}
	return v
}

// ReadZookeeperAll reads every pod's view, in parallel.
func ReadZookeeperAll(ctx context.Context, ex Exec, ns string, pods []string, container, marker string) []ZookeeperView {
	return eachPod(pods, func(p string) ZookeeperView { return ReadZookeeper(ctx, ex, ns, p, container, marker) })
}

// ZookeeperVerdict is what the views say about the ensemble.
type ZookeeperVerdict struct {
	// Healthy: every pod serves, one leader and len(pods)-1 followers, one
	// configuration (servers and version) on all, whose participants are
	// exactly the pods, and (when asked) one marker on all.
	Healthy bool
	// Leaders are the pods that say they lead; Markers the distinct
	// markers read. More than one of either is a split brain.
	Leaders, Markers []string
	// Detail says what is wrong, in words.
	Detail string
}

// Split reports two leaders at once or two markers: two ensembles.
func (v ZookeeperVerdict) Split() bool { return len(v.Leaders) > 1 || len(v.Markers) > 1 }

// JudgeZookeeper judges views, one per pod of pods (the StatefulSet's
// names, whose server lines name them by FQDN), with wantMarker true when
// the views were read with a marker.
func JudgeZookeeper(views []ZookeeperView, pods []string, wantMarker bool) ZookeeperVerdict {
	var v ZookeeperVerdict
	var problems []string
	configs := map[string]bool{}
	markers := map[string]bool{}
	followers := 0
	for _, z := range views {
		switch z.Mode {
		case "leader":
			v.Leaders = append(v.Leaders, z.Pod)
		case "follower":
			followers++
		default:
			problems = append(problems, fmt.Sprintf("%s: mode %q %s", z.Pod, z.Mode, z.Err))
		}
		if z.Err != "" && z.Mode != "" {
			problems = append(problems, fmt.Sprintf("%s: %s", z.Pod, z.Err))
		}
		if z.Mode != "" {
			configs[strings.Join(z.Servers, " ")+" version="+z.Version] = true
		}
		if z.Marker != "" {
			markers[z.Marker] = true
		} else if wantMarker && z.Mode != "" && z.Err == "" {
			problems = append(problems, z.Pod+": no marker")
		}
	}
	for m := range markers {
		v.Markers = append(v.Markers, m)
	}
	slices.Sort(v.Markers)
	if len(v.Leaders) != 1 || followers != len(pods)-1 {
		problems = append(problems, fmt.Sprintf("leaders %q and %d followers, want 1 and %d", v.Leaders, followers, len(pods)-1))
	}
	if len(configs) != 1 {
		var cs []string
		for c := range configs {
			cs = append(cs, c)
		}
		slices.Sort(cs)
		problems = append(problems, fmt.Sprintf("%d configurations: %q", len(configs), cs))
	} else {
		for c := range configs {
			if got := participants(c); !slices.Equal(got, pods) {
				problems = append(problems, fmt.Sprintf("participants %q, want the pods %q", got, pods))
			}
		}
	}
	if len(v.Markers) > 1 {
		problems = append(problems, fmt.Sprintf("markers %q: two ensembles", v.Markers))
	}
	v.Healthy = len(problems) == 0 && len(views) == len(pods)
	v.Detail = strings.Join(problems, "; ")
	return v
}

// participants are the pod names (first label of the host) of a
// configuration's participant server lines, sorted.
func participants(config string) []string {
	var out []string
	for f := range strings.FieldsSeq(config) {
		_, rest, ok := strings.Cut(f, "=")
		if !ok || !strings.HasPrefix(f, "server.") || !strings.Contains(rest, ":participant") {
			continue
		}
		host, _, _ := strings.Cut(rest, ":")
		name, _, _ := strings.Cut(host, ".")
		out = append(out, name)
	}
	slices.Sort(out)
	return out
}

// ZookeeperProgress scores how far views of a bootstrapping ensemble got
// (see Observation.Progress): per pod, one point for serving, one for
// leading or following, one for the marker; plus the participants of the
// largest configuration any of them runs. It is pure.
func ZookeeperProgress(views []ZookeeperView) int {
	score, most := 0, 0
	for _, z := range views {
		if z.Mode != "" {
			score++
		}
		if z.Mode == "leader" || z.Mode == "follower" {
			score++
		}
		if z.Marker != "" {
			score++
		}
		most = max(most, len(participants(strings.Join(z.Servers, " "))))
	}
	return score + most
}

// ZookeeperSplit says why views show two ensembles at once: two members
// that lead (or serve alone) with different configurations; "" when they
// do not. Two leaders of one configuration are a leader change seen
// half-way, not two ensembles. It is pure.
func ZookeeperSplit(views []ZookeeperView) string {
	leads := map[string][]string{}
	for _, z := range views {
		if z.Mode == "leader" || z.Mode == "standalone" {
			c := strings.Join(z.Servers, " ") + " version=" + z.Version
			leads[c] = append(leads[c], z.Pod)
		}
	}
	if len(leads) < 2 {
		return ""
	}
	var s []string
	for _, c := range slices.Sorted(maps.Keys(leads)) {
		s = append(s, fmt.Sprintf("%q lead %s", leads[c], c))
	}
	return "two ensembles at once: " + strings.Join(s, "; ")
}
