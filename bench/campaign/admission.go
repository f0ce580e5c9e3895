package main

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
)

// cpuPressure is a reading of /proc/pressure/cpu's "some" line: the share of
// the last 10 s in which a runnable task waited for a CPU (percent), and the
// time any task waited since boot.
type cpuPressure struct {
	avg10 float64
	total time.Duration
}

// parsePressure reads the "some" line of a /proc/pressure/cpu text.
func parsePressure(text string) (cpuPressure, error) {
	for line := range strings.Lines(text) {
		f := strings.Fields(line)
		if len(f) == 0 || f[0] != "some" {
			continue
		}
		var p cpuPressure
		var avg, tot bool
		for _, kv := range f[1:] {
			k, v, _ := strings.Cut(kv, "=")
			switch k {
			case "avg10":
				x, err := strconv.ParseFloat(v, 64)
				if err != nil || x < 0 || x > 100 {
					return cpuPressure{}, fmt.Errorf("cpu pressure: bad avg10 %q", v)
				}
				p.avg10, avg = x, true
			case "total":
				us, err := strconv.ParseUint(v, 10, 63)
				if err != nil {
					return cpuPressure{}, fmt.Errorf("cpu pressure: bad total %q", v)
				}
				p.total, tot = time.Duration(us)*time.Microsecond, true
			}
		}
		if !avg || !tot {
			return cpuPressure{}, fmt.Errorf("cpu pressure: no avg10 or total in %q", strings.TrimSpace(line))
		}
		return p, nil
	}
	return cpuPressure{}, fmt.Errorf("cpu pressure: no \"some\" line")
}

// readPressure reads this machine's CPU pressure (a kernel with PSI).
func readPressure() (cpuPressure, error) {
	b, err := os.ReadFile("/proc/pressure/cpu")
	if err != nil {
		return cpuPressure{}, err
	}
	return parsePressure(string(b))
}

// admission holds back the start of the next round while the machine is
// saturated, so that rounds in flight are judged on their own speed and not
// on how many the campaign piled onto two cores: at or above
// -max-cpu-pressure (the last 10 s), no round starts; two rounds start at
// least gap apart, so the rounds' busiest minute, their start, is spread
// out; and the rounds in flight plan at most maxMembers members together
// (each counted at its peak, Plan.Peak), since the pressure at a round's
// start does not see the scale-ups planned for later. A round larger than
// maxMembers starts alone. -parallel stays the upper bound of rounds in
// flight.
type admission struct {
	maxPressure float64 // percent; 0: no limit
	gap         time.Duration
	maxMembers  int // 0: no limit
	read        func() (cpuPressure, error)

	last time.Time     // the last start
	held time.Duration // time rounds waited for the machine, in all

	mu      sync.Mutex
	members int // planned by the rounds in flight
}

// wait returns once the next round, of members members at its peak, may
// start, or false when ctx ends or stop fires first. A round started is
// ended by done.
func (a *admission) wait(ctx context.Context, stop <-chan time.Time, members int) bool {
	t0 := time.Now()
	tick := time.NewTicker(time.Second) // avg10 moves little faster
	defer tick.Stop()
	for {
		if a.open(time.Now(), members) {
			a.last = time.Now()
			a.held += time.Since(t0)
			a.take(members)
			return true
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			return false
		case <-stop:
			return false
		}
	}
}

// take counts a round of members members as in flight.
func (a *admission) take(members int) {
	a.mu.Lock()
	a.members += members
	a.mu.Unlock()
}

// done ends a round of members members that wait let start.
func (a *admission) done(members int) { a.take(-members) }

// open reports whether a round of members members may start at now.
func (a *admission) open(now time.Time, members int) bool {
	if !a.last.IsZero() && now.Sub(a.last) < a.gap {
		return false
	}
	a.mu.Lock()
	inFlight := a.members
	a.mu.Unlock()
	if a.maxMembers > 0 && inFlight > 0 && inFlight+members > a.maxMembers {
		return false
	}
	if a.maxPressure <= 0 {
		return true
	}
	p, err := a.read()
	// A kernel without PSI gives no reading: only the gap and -parallel
	// limit the rounds then (said once, at the start).
	return err != nil || p.avg10 < a.maxPressure
}
