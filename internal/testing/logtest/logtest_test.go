package logtest

import (
	"errors"
	"log/slog"
	"maps"
	"strings"
	"testing"
)

func TestRecorderKeepsMessagesAndAttributes(t *testing.T) {
	r := New()
	log := r.Logger().With("source", "dns").WithGroup("peer")
	log.Warn("lookup failed", "name", "web-0", slog.Group("addr", "ip", "10.0.0.1"), "err", errors.New("refused"))
	r.Logger().Info("lookup recovered")
	got := r.Find("lookup failed")
	if len(got) != 1 || got[0].Level != slog.LevelWarn {
		t.Fatalf("Find = %v", got)
	}
	want := map[string]string{"source": "dns", "peer.name": "web-0", "peer.addr.ip": "10.0.0.1", "peer.err": "refused"}
	if !maps.Equal(got[0].Attrs, want) {
		t.Errorf("Attrs = %v, want %v", got[0].Attrs, want)
	}
	if n := len(r.AtLevel(slog.LevelInfo)); n != 1 {
		t.Errorf("%d info records, want 1:\n%s", n, r)
	}
	r.Reset()
	if n := len(r.Records()); n != 0 {
		t.Errorf("%d records after Reset", n)
	}
}

// ParseText reads back what slog's text handler wrote, quoted values and
// groups included, and skips lines that are no records.
func TestParseTextReadsTheTextHandler(t *testing.T) {
	var b strings.Builder
	log := slog.New(slog.NewTextHandler(&b, &slog.HandlerOptions{Level: slog.LevelDebug}))
	log.Warn("sink failing", "sink", "hosts-file", "err", errors.New(`open "/etc/hosts": denied`), slog.Group("peer", "name", "web-0"))
	b.WriteString("a hook's own output = not a record\n")
	log.Debug("applied", "result", "unchanged", "empty", "")
	recs := ParseText(b.String())
	if len(recs) != 2 {
		t.Fatalf("ParseText = %v, want 2 records", recs)
	}
	want := map[string]string{"sink": "hosts-file", "err": `open "/etc/hosts": denied`, "peer.name": "web-0"}
	if recs[0].Level != slog.LevelWarn || recs[0].Message != "sink failing" || !maps.Equal(recs[0].Attrs, want) {
		t.Errorf("first record %v, want sink failing with %v", recs[0], want)
	}
	if recs[1].Level != slog.LevelDebug || recs[1].Attrs["result"] != "unchanged" || recs[1].Attrs["empty"] != "" {
		t.Errorf("second record %v", recs[1])
	}
}
