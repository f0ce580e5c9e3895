package main

import (
	"encoding/json"
	"fmt"
	"math"
	"time"

	"github.com/flockd/flock/bench/internal/benchkit"
	"github.com/flockd/flock/internal/atomicfile"
	"github.com/flockd/flock/localcluster/apps"
)

// Summary is one campaign run's machine-readable result, the form
// bench/results/ keeps one file of per run (-results writes it; the runs
// before the flag existed were transcribed from their printed summaries,
// with what was printed then). A field that was not measured is absent.
type Summary struct {
	Run     string `json:"run"`               // "25", or "4b" for a run between two numbered ones
	App     string `json:"app"`               // the application whose oracle judged the rounds
	Command string `json:"command"`           // as run, with its flags
	Commit  string `json:"commit,omitempty"`  // the code the images and the campaign were built from
	Started string `json:"started,omitempty"` // RFC 3339, UTC
	Ended   string `json:"ended,omitempty"`
	Seed    uint64 `json:"seed,omitempty"`
	// Aborted counts subject rounds stopped by the campaign or a signal,
	// not judged.
	Aborted  int              `json:"aborted,omitempty"`
	Subjects []SubjectSummary `json:"subjects"`
	Machine  *Machine         `json:"machine,omitempty"`
	// Counted is whether the run's flock rounds count toward the figure
	// in bench/README.md (one version of the code, a run not disturbed).
	Counted bool `json:"counted"`
	// Disturbed is a run spoiled by its operator's mistake (e.g. two
	// campaigns on one cluster): it is in no total.
	Disturbed bool   `json:"disturbed,omitempty"`
	Notes     string `json:"notes,omitempty"` // the run's notes, a file beside this one
}

// SubjectSummary is one subject's verdicts in a run. Times are seconds.
type SubjectSummary struct {
	Subject    string  `json:"subject"` // flock or upstream
	Rounds     int     `json:"rounds"`  // judged
	Split      int     `json:"splitBrains"`
	Stuck      int     `json:"stuck"`
	HealthyP50 float64 `json:"healthyP50Seconds,omitempty"`
	HealthyP99 float64 `json:"healthyP99Seconds,omitempty"`
	RejoinP50  float64 `json:"rejoinP50Seconds,omitempty"`
	RejoinP99  float64 `json:"rejoinP99Seconds,omitempty"`
}

// Machine is what the run cost the whole machine.
type Machine struct {
	BusyPercent         float64 `json:"busyPercent"`
	Cores               float64 `json:"cores"`
	CoreSecondsPerRound float64 `json:"coreSecondsPerRound"`
	RoundsPerHour       float64 `json:"roundsPerHour"`
	CPUWaitPercent      float64 `json:"cpuWaitPercent,omitempty"`
	// Split is where the busy time went (cpuSplit), largest first.
	Split []CPUShare `json:"split,omitempty"`
}

// summarize returns each subject's verdicts, in the order of subjects.
func summarize(subjects []string, results map[string][]apps.Outcome) []SubjectSummary {
	out := make([]SubjectSummary, 0, len(subjects))
	for _, s := range subjects {
		sum := SubjectSummary{Subject: s, Rounds: len(results[s])}
		var healthy, rejoin []time.Duration
		for _, o := range results[s] {
			switch {
			case o.Split:
				sum.Split++
			case o.Stuck:
				sum.Stuck++
			}
			if o.Healthy > 0 {
				healthy = append(healthy, o.Healthy)
			}
			if o.Rejoin > 0 {
				rejoin = append(rejoin, o.Rejoin)
			}
		}
		sum.HealthyP50, sum.HealthyP99 = quantiles(healthy)
		sum.RejoinP50, sum.RejoinP99 = quantiles(rejoin)
		out = append(out, sum)
	}
	return out
}

// quantiles are p50 and p99 in seconds to 0.1 s, zero without samples.
func quantiles(ds []time.Duration) (p50, p99 float64) {
	if len(ds) == 0 {
		return 0, 0
	}
	r := func(d time.Duration) float64 { return d.Round(100 * time.Millisecond).Seconds() }
	return r(benchkit.Percentile(ds, 50)), r(benchkit.Percentile(ds, 99))
}

// pair prints p50 / p99 as the summary table does, "-" without samples.
func pair(p50, p99 float64) string {
	if p50 == 0 && p99 == 0 {
		return "-"
	}
	d := func(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }
	return fmt.Sprintf("%s / %s", d(p50), d(p99))
}

// writeSummary writes s as indented JSON to path, whole or not at all.
func writeSummary(path string, s Summary) error {
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return err
	}
	if err := atomicfile.WriteFile(path, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("write results: %w", err)
	}
	return nil
}

func round1(f float64) float64 { return math.Round(f*10) / 10 }
