package benchkit

import (
	"fmt"
	"math"
	"slices"
	"time"
)

// Percentile is the nearest-rank p-th percentile (0 < p <= 100) of ds: the
// smallest sample with at least p percent of the samples at or below it. 0
// when there are none.
func Percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := int(math.Ceil(p/100*float64(len(s)))) - 1
	return s[max(0, min(i, len(s)-1))]
}

// Latency prints the p-th percentile of ds for a table: "12.3ms" below a
// second, else rounded to the millisecond; "-" when there are no samples.
func Latency(ds []time.Duration, p float64) string {
	if len(ds) == 0 {
		return "-"
	}
	v := Percentile(ds, p)
	if v < time.Second {
		return fmt.Sprintf("%.1fms", float64(v)/float64(time.Millisecond))
	}
	return v.Round(time.Millisecond).String()
}
