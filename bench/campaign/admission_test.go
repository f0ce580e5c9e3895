package main

import (
	"errors"
	"testing"
	"time"
)

// A /proc/pressure/cpu of kernel 6.18 (the "full" line is all zeros for CPU).
const pressureText = `some avg10=95.98 avg60=93.87 avg300=87.34 total=1597882519
full avg10=0.00 avg60=0.00 avg300=0.00 total=0
`

func TestParsePressure(t *testing.T) {
	p, err := parsePressure(pressureText)
	if err != nil {
		t.Fatal(err)
	}
	if p.avg10 != 95.98 || p.total != 1597882519*time.Microsecond {
		t.Fatalf("parsePressure = %+v; want avg10 95.98, total 1597.882519s", p)
	}
	for _, bad := range []string{
		"",
		"full avg10=1.00 avg60=0.00 avg300=0.00 total=5\n",
		"some avg10=x avg60=0.00 avg300=0.00 total=5\n",
		"some avg10=101 avg60=0.00 avg300=0.00 total=5\n",
		"some avg60=0.00 avg300=0.00 total=5\n",
		"some avg10=1.00 avg60=0.00 avg300=0.00\n",
	} {
		if p, err := parsePressure(bad); err == nil {
			t.Errorf("parsePressure(%q) = %+v, no error", bad, p)
		}
	}
}

func TestAdmissionOpen(t *testing.T) {
	now := time.Unix(1000, 0)
	var reading cpuPressure
	var readErr error
	a := &admission{maxPressure: 60, gap: 5 * time.Second, read: func() (cpuPressure, error) { return reading, readErr }}
	for _, c := range []struct {
		name     string
		last     time.Time
		pressure float64
		err      error
		want     bool
	}{
		{"first round, idle machine", time.Time{}, 10, nil, true},
		{"first round, saturated machine", time.Time{}, 96, nil, false},
		{"at the limit", time.Time{}, 60, nil, false},
		{"idle machine, but within the gap of the last start", now.Add(-4 * time.Second), 10, nil, false},
		{"idle machine, the gap passed", now.Add(-5 * time.Second), 10, nil, true},
		{"no pressure to read: the gap alone", now.Add(-6 * time.Second), 0, errors.New("no PSI"), true},
	} {
		a.last, reading.avg10, readErr = c.last, c.pressure, c.err
		if got := a.open(now, 3); got != c.want {
			t.Errorf("%s: open = %v, want %v", c.name, got, c.want)
		}
	}
	a.maxPressure, a.last, reading.avg10 = 0, time.Time{}, 100
	if !a.open(now, 3) {
		t.Error("-max-cpu-pressure 0 (no limit) on a saturated machine: open = false")
	}
}

// TestAdmissionMembers: the rounds in flight plan at most maxMembers
// members together, each at its peak (zookeeper-7's rounds 81-84 scaled to
// 5 members each at once, 20 JVMs on two cores, and two of them stalled); a
// round larger than the limit starts alone, and a round that ends frees
// its members.
func TestAdmissionMembers(t *testing.T) {
	now := time.Unix(1000, 0)
	a := &admission{maxMembers: 14, read: func() (cpuPressure, error) { return cpuPressure{avg10: 10}, nil }}
	start := func(members int, want bool) {
		t.Helper()
		got := a.open(now, members)
		if got != want {
			t.Fatalf("%d members in flight, a round of %d: open = %v, want %v", a.members, members, got, want)
		}
		if got {
			a.take(members) // as wait does
		}
	}
	start(5, true)
	start(5, true)
	start(3, true)  // 13
	start(5, false) // 18
	start(3, false) // 16
	a.done(5)
	start(3, true) // 11
	start(3, true) // 14
	a.done(5)
	a.done(3)
	a.done(3)
	a.done(3)
	start(20, true) // alone: larger than the limit
	start(3, false)
	a.done(20)
	a.maxMembers = 0
	start(20, true)
	start(20, true)
}
