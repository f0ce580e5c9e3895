package dns

import (
	"testing"
	"time"
)

// TestPauseJitterVaries checks that the backoff after failures is jittered
// for real: pauses for the same failure count differ between calls and
// spread over [d/2, d], so members whose lookups fail together do not
// retry in lockstep.
func TestPauseJitterVaries(t *testing.T) {
	src, err := New(Config{Name: svc, Servers: []string{"127.0.0.1:53"}, Period: time.Second, MaxBackoff: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	const d = 4 * time.Second // level 2: Period·2²
	seen := map[time.Duration]bool{}
	lo, hi := d, time.Duration(0)
	for range 200 {
		p := src.backoff().Delay(2)
		seen[p] = true
		lo, hi = min(lo, p), max(hi, p)
	}
	// 200 uniform draws over [2s, 4s]: fewer than 100 distinct values, or
	// none in the lowest or highest fifth, does not happen by chance.
	if len(seen) < 100 || lo > d*6/10 || hi < d*9/10 {
		t.Errorf("200 pauses: %d distinct, from %v to %v; want them spread over [%v, %v]", len(seen), lo, hi, d/2, d)
	}
}
