package benchkit

import (
	"testing"
	"time"
)

func TestPercentile(t *testing.T) {
	ms := func(ns ...int) []time.Duration {
		var ds []time.Duration
		for _, n := range ns {
			ds = append(ds, time.Duration(n)*time.Millisecond)
		}
		return ds
	}
	for _, tt := range []struct {
		ds   []time.Duration
		p    float64
		want time.Duration
	}{
		{nil, 50, 0},
		{ms(7), 99, 7 * time.Millisecond},
		{ms(4, 1, 3, 2), 50, 2 * time.Millisecond}, // nearest rank: ceil(0.5*4) = 2nd
		{ms(4, 1, 3, 2), 51, 3 * time.Millisecond},
		{ms(4, 1, 3, 2), 100, 4 * time.Millisecond},
		{ms(10, 20, 30, 40, 50, 60, 70, 80, 90, 100), 99, 100 * time.Millisecond},
		{ms(10, 20, 30, 40, 50, 60, 70, 80, 90, 100), 90, 90 * time.Millisecond},
	} {
		if got := Percentile(tt.ds, tt.p); got != tt.want {
			t.Errorf("Percentile(%v, %v) = %v, want %v", tt.ds, tt.p, got, tt.want)
		}
	}
	if got := Latency(ms(1500), 50); got != "1.5s" {
		t.Errorf("Latency = %q, want 1.5s", got)
	}
	if got := Latency(ms(12), 50); got != "12.0ms" {
		t.Errorf("Latency = %q, want 12.0ms", got)
	}
	if got := Latency(nil, 50); got != "-" {
		t.Errorf("Latency(none) = %q, want -", got)
	}
}
