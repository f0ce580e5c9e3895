// Package logtest captures slog records in tests, so that a test asserts
// on a record's message, level and attributes rather than on substrings of
// formatted log text: a record found by its constant message, a value read
// by its key.
package logtest

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
)

// Record is one captured log record.
type Record struct {
	Level   slog.Level
	Message string
	// Attrs holds every attribute, the logger's own (With) and the
	// record's, by key (groups joined with "."), each value as slog's text
	// handler prints it.
	Attrs map[string]string
}

// String is the record as one line, for failure messages.
func (r Record) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "level=%s msg=%q", r.Level, r.Message)
	for k, v := range r.Attrs {
		fmt.Fprintf(&b, " %s=%q", k, v)
	}
	return b.String()
}

// Recorder keeps every record logged through its Logger, at every level.
// It is safe for concurrent use.
type Recorder struct {
	mu   sync.Mutex
	recs []Record
}

// New returns an empty Recorder.
func New() *Recorder { return &Recorder{} }

// Logger returns a logger whose records r keeps.
func (r *Recorder) Logger() *slog.Logger { return slog.New(&handler{r: r}) }

// Records returns the records so far, oldest first.
func (r *Recorder) Records() []Record {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Record(nil), r.recs...)
}

// Find returns the records with message msg and the attributes kv, oldest
// first (see the function Find).
func (r *Recorder) Find(msg string, kv ...string) []Record { return Find(r.Records(), msg, kv...) }

// Find returns the records of recs with message msg (any message when msg
// is "") whose attributes hold each key, value pair of kv, in order.
func Find(recs []Record, msg string, kv ...string) []Record {
	var out []Record
	for _, rec := range recs {
		ok := msg == "" || rec.Message == msg
		for i := 0; ok && i+1 < len(kv); i += 2 {
			ok = rec.Attrs[kv[i]] == kv[i+1]
		}
		if ok {
			out = append(out, rec)
		}
	}
	return out
}

// AtLevel returns the records at level l exactly, oldest first.
func (r *Recorder) AtLevel(l slog.Level) []Record {
	var out []Record
	for _, rec := range r.Records() {
		if rec.Level == l {
			out = append(out, rec)
		}
	}
	return out
}

// AtLeast returns the records at level l or above, oldest first.
func (r *Recorder) AtLeast(l slog.Level) []Record {
	var out []Record
	for _, rec := range r.Records() {
		if rec.Level >= l {
			out = append(out, rec)
		}
	}
	return out
}

// Messages returns the messages of recs, in order.
func Messages(recs []Record) []string {
	out := make([]string, len(recs))
	for i, rec := range recs {
		out[i] = rec.Message
	}
	return out
}

// Reset forgets every record so far.
func (r *Recorder) Reset() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.recs = nil
}

// String is every record, one a line, for failure messages.
func (r *Recorder) String() string {
	var b strings.Builder
	for _, rec := range r.Records() {
		b.WriteString(rec.String())
		b.WriteByte('\n')
	}
	return b.String()
}

// ParseText returns the records of a log written by slog's text handler
// (a process's stderr, say), oldest first: each line with a level and a
// message, its other keys as attributes (time left out); lines that are not
// records (a child process's output) are skipped.
func ParseText(log string) []Record {
	var out []Record
	for line := range strings.Lines(log) {
		attrs, ok := parseLine(strings.TrimRight(line, "\n"))
		if !ok {
			continue
		}
		var l slog.Level
		if _, hasMsg := attrs["msg"]; !hasMsg || l.UnmarshalText([]byte(attrs["level"])) != nil {
			continue
		}
		rec := Record{Level: l, Message: attrs["msg"], Attrs: attrs}
		delete(attrs, "time")
		delete(attrs, "level")
		delete(attrs, "msg")
		out = append(out, rec)
	}
	return out
}

// parseLine splits one text-handler line into its keys and values: key=value
// pairs apart by spaces, a value quoted as Go quotes a string when it must be.
func parseLine(line string) (map[string]string, bool) {
	attrs := map[string]string{}
	for line != "" {
		key, rest, ok := strings.Cut(line, "=")
		if !ok || key == "" || strings.ContainsAny(key, " \"") {
			return nil, false
		}
		var val string
		if strings.HasPrefix(rest, `"`) {
			q, err := strconv.QuotedPrefix(rest)
			if err != nil {
				return nil, false
			}
			val, _ = strconv.Unquote(q)
			rest = rest[len(q):]
		} else {
			val, rest, _ = strings.Cut(rest, " ")
			rest = " " + rest
		}
		attrs[key] = val
		if rest = strings.TrimPrefix(rest, " "); rest == line {
			return nil, false
		}
		line = rest
	}
	return attrs, len(attrs) > 0
}

// handler is a Recorder's slog.Handler: attrs are the logger's own, their
// keys already prefixed by their groups; group is the open group's prefix.
type handler struct {
	r     *Recorder
	attrs map[string]string
	group string
}

func (h *handler) Enabled(context.Context, slog.Level) bool { return true }

func (h *handler) Handle(_ context.Context, rec slog.Record) error {
	attrs := make(map[string]string, len(h.attrs)+rec.NumAttrs())
	for k, v := range h.attrs {
		attrs[k] = v
	}
	rec.Attrs(func(a slog.Attr) bool {
		flatten(attrs, h.group, a)
		return true
	})
	h.r.mu.Lock()
	defer h.r.mu.Unlock()
	h.r.recs = append(h.r.recs, Record{Level: rec.Level, Message: rec.Message, Attrs: attrs})
	return nil
}

func (h *handler) WithAttrs(as []slog.Attr) slog.Handler {
	attrs := make(map[string]string, len(h.attrs)+len(as))
	for k, v := range h.attrs {
		attrs[k] = v
	}
	for _, a := range as {
		flatten(attrs, h.group, a)
	}
	return &handler{r: h.r, attrs: attrs, group: h.group}
}

func (h *handler) WithGroup(name string) slog.Handler {
	if name == "" {
		return h
	}
	return &handler{r: h.r, attrs: h.attrs, group: h.group + name + "."}
}

// flatten adds a to attrs under prefix, a group's members each under its
// own key.
func flatten(attrs map[string]string, prefix string, a slog.Attr) {
	v := a.Value.Resolve()
	if v.Kind() == slog.KindGroup {
		if a.Key != "" {
			prefix += a.Key + "."
		}
		for _, m := range v.Group() {
			flatten(attrs, prefix, m)
		}
		return
	}
	if a.Key == "" {
		return
	}
	attrs[prefix+a.Key] = v.String()
}
