package hostsfile

import (
	"bytes"
	"cmp"
	"strings"
	"testing"
)

// FuzzRender: rendering is idempotent, keeps every foreign byte, and never
// leaves two blocks of one id.
func FuzzRender(f *testing.F) {
	f.Add([]byte("127.0.0.1\tlocalhost\n"), "web", "10.0.0.1\tweb-0\n")
	f.Add([]byte("a\n# BEGIN flock peer-finder web\nold\n# END flock peer-finder web\nb\n# BEGIN flock peer-finder web\nx\n# END flock peer-finder web\n"), "web", "10.0.0.2\tweb-1\n")
	f.Add([]byte("no newline"), "", "10.0.0.1\tx\n")
	f.Add([]byte("# BEGIN flock peer-finder db\n1.1.1.1 db-0\n# END flock peer-finder db\n"), "web", "")
	f.Fuzz(func(t *testing.T, current []byte, id, lines string) {
		if !validFuzzID(id) || strings.Contains(lines, "# BEGIN") || strings.Contains(lines, "# END") {
			return
		}
		block := blockOf(id, lines)
		out, err := Render(current, id, block)
		if err != nil {
			return
		}
		again, err := Render(out, id, block)
		if err != nil || !bytes.Equal(again, out) {
			t.Fatalf("not idempotent: Render(Render(x)) = %q, %v; Render(x) = %q", again, err, out)
		}
		begin, _ := Markers(id)
		if n := countLines(out, begin); n != 1 {
			t.Fatalf("%d blocks of id %q in %q", n, id, out)
		}
		// Foreign bytes: what is outside our blocks is the same before and
		// after (up to the newline added before an appended block).
		before, after := outside(current, id), outside(out, id)
		if !bytes.Equal(bytes.TrimSuffix(after, []byte("\n")), bytes.TrimSuffix(before, []byte("\n"))) {
			t.Fatalf("foreign bytes changed:\nbefore %q\nafter  %q", before, after)
		}
	})
}

// validFuzzID mirrors the -hosts-id rule (config.validID): the id is
// validated before it reaches Render.
func validFuzzID(id string) bool {
	if len(id) > 63 {
		return false
	}
	for i, r := range id {
		alnum := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9'
		if !alnum && (i == 0 || r != '.' && r != '_' && r != '-') {
			return false
		}
	}
	return true
}

func blockOf(id, lines string) []byte {
	begin, end := Markers(id)
	var b strings.Builder
	b.WriteString(begin + "\n")
	for l := range strings.SplitSeq(lines, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			b.WriteString(l + "\n")
		}
	}
	b.WriteString(end + "\n")
	return []byte(b.String())
}

func countLines(content []byte, want string) int {
	n := 0
	for raw := range bytes.Lines(content) {
		if strings.TrimSpace(string(raw)) == want {
			n++
		}
	}
	return n
}

// outside returns content without the lines of complete blocks of id.
func outside(content []byte, id string) []byte {
	begin, end := Markers(id)
	var out []byte
	in := false
	for raw := range bytes.Lines(content) {
		line := strings.TrimSpace(string(raw))
		switch {
		case !in && line == begin:
			in = true
		case in && line == end:
			in = false
		case !in:
			out = append(out, raw...)
		}
	}
	return out
}

// FuzzParseExpected: accepted specs give valid, sorted, distinct names, and
// never more than MaxExpected.
func FuzzParseExpected(f *testing.F) {
	f.Add("ps=1,worker=3")
	f.Add("web=2000000000")
	f.Add("a,b,a, c=0")
	f.Add("-x=2")
	f.Fuzz(func(t *testing.T, spec string) {
		names, err := ParseExpected(spec)
		if err != nil {
			return
		}
		if len(names) > MaxExpected {
			t.Fatalf("%d names from %q", len(names), spec)
		}
		for i, n := range names {
			if err := ValidName(n); err != nil {
				t.Fatalf("%q gave invalid name: %v", spec, err)
			}
			if i > 0 && cmp.Or(naturalCompare(names[i-1], n), strings.Compare(names[i-1], n)) >= 0 {
				t.Fatalf("%q: names not sorted and distinct: %q", spec, names)
			}
		}
	})
}
