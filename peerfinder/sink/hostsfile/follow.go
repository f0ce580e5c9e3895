package hostsfile

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/netip"
	"slices"
	"strings"

	"github.com/flockd/flock/internal/atomicfile"
	"github.com/flockd/flock/peerfinder/sink"
)

// ReadBlock parses the managed block for id in content: its entries in file
// order (comment lines skipped) and whether the block is there, both
// markers included. It is pure; it is how a reader checks what a writer
// produced.
func ReadBlock(content []byte, id string) ([]Entry, bool, error) {
	begin, end := Markers(id)
	var entries []Entry
	in, found := false, false
	for raw := range bytes.Lines(content) {
		line := strings.TrimSpace(string(raw))
		switch {
		case !in && line == begin:
			if found {
				return nil, false, fmt.Errorf("marker %q repeated", begin)
			}
			in = true
		case in && line == end:
			in, found = false, true
		case in && line == begin:
			return nil, false, fmt.Errorf("marker %q repeated before %q", begin, end)
		case in && (line == "" || strings.HasPrefix(line, "#")):
		case in:
			fields := strings.Fields(line)
			if len(fields) < 2 {
				return nil, false, fmt.Errorf("managed line %q has no name", line)
			}
			if _, err := netip.ParseAddr(fields[0]); err != nil {
				return nil, false, fmt.Errorf("managed line %q: %w", line, err)
			}
			entries = append(entries, Entry{IP: fields[0], Name: fields[1], Aliases: fields[2:]})
		}
	}
	if in {
		return nil, false, fmt.Errorf("marker %q without %q", begin, end)
	}
	return entries, found, nil
}

// Follower returns the sink for a pod that shares the file but does not
// write it (sink/leader's Follow, with -hosts-lease): with WaitForAll its
// Apply returns a pending result (sink.Pending of an *IncompleteError)
// until the file, as the Lease holder wrote it, has an address for every
// expected name, so that an init-mode follower ends only when the shared
// file is complete, without counting the wait as failures; after that, and
// without WaitForAll, Apply only succeeds. It never writes.
func (s *Sink) Follower() sink.Sink { return &follower{s: s} }

type follower struct {
	s        *Sink
	complete bool
}

func (f *follower) Apply(ctx context.Context, _ sink.Delivery) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if !f.s.opts.WaitForAll || f.complete {
		return nil
	}
	content, err := atomicfile.ReadFile(ctx, f.s.opts.Path) // a shared lock: never a half-done in-place rewrite
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("hosts file: %w", err)
	}
	entries, _, err := ReadBlock(content, f.s.opts.ID)
	if err != nil {
		return fmt.Errorf("hosts file %s: %w", f.s.opts.Path, err)
	}
	var missing []string
	for _, e := range f.s.opts.Expected {
		if !slices.ContainsFunc(entries, func(x Entry) bool { return x.Name == e }) {
			missing = append(missing, e)
		}
	}
	if len(missing) > 0 {
		slices.SortFunc(missing, naturalCompare)
		return sink.Pending(&IncompleteError{Missing: slices.Compact(missing)})
	}
	f.complete = true
	return nil
}
