package hook_test

import (
	"context"
	"testing"

	"github.com/flockd/flock/peerfinder/sink/hook"
)

// A hook's output is logged up to hook.MaxOutputLines records and
// hook.MaxOutputBytes bytes per run (issue 36 #19): 100 MB of output
// became 204 MB of log. The rest is read and dropped, and one record per
// run says how much.
func TestApplyBoundsOutputPerRun(t *testing.T) {
	const lines = 200_000 // 20 MB
	h, logs := newHook(t, hook.Config{OnChange: helper("flood", "200000")})
	if err := apply(t, h, context.Background(), delivery(1, false)); err != nil {
		t.Fatal(err)
	}
	logged, loggedBytes := 0, 0
	var dropped map[string]any
	for _, r := range logs.records(t) {
		switch r["msg"] {
		case "hook output":
			logged++
			loggedBytes += len(r["line"].(string)) + 1
		case "hook output dropped":
			if dropped != nil {
				t.Errorf("a second drop record: %v", r)
			}
			dropped = r
		}
	}
	if logged > hook.MaxOutputLines || loggedBytes > hook.MaxOutputBytes {
		t.Fatalf("logged %d lines, %d bytes of a 20 MB output; want at most %d lines, %d bytes", logged, loggedBytes, hook.MaxOutputLines, hook.MaxOutputBytes)
	}
	if dropped == nil {
		t.Fatalf("no \"hook output dropped\" record after %d logged lines", logged)
	}
	total := lines + 1 // and "done" on stderr
	totalBytes := lines*100 + len("done\n")
	if got := int(dropped["dropped_lines"].(float64)); got != total-logged {
		t.Errorf("dropped_lines %d, want %d", got, total-logged)
	}
	if got := int(dropped["dropped_bytes"].(float64)); got != totalBytes-loggedBytes {
		t.Errorf("dropped_bytes %d, want %d", got, totalBytes-loggedBytes)
	}
	if dropped["level"] != "WARN" || dropped["hook"] != "on-change" {
		t.Errorf("drop record %v, want WARN naming the hook", dropped)
	}

	// The budget is per run: the next run logs again.
	before := len(logs.records(t))
	if err := apply(t, h, context.Background(), delivery(2, false)); err != nil {
		t.Fatal(err)
	}
	if n := len(logs.records(t)) - before; n < 2 {
		t.Errorf("the second run logged %d records", n)
	}
}
