// Package jsonfile implements the JSON file sink: the whole peer set as a
// versioned sink.Document (the same document hooks get on stdin with
// -format=json), written atomically. It replaces only what it could have
// written (Replaceable): an existing file that is not a peer document is
// left alone and Apply fails naming it.
//
// Unchanged content is not rewritten, so file watchers wake only for real
// changes. The document's generation is deliberately not part of "content":
// when the file already holds the same self, bootstrap role and peers under
// another generation (peer-finder restarted, so its counter began again at
// 1, or a retried delivery), the file is left alone and keeps the generation
// at which that content was first written. Readers should therefore treat
// generation as "changes whenever the content changes", not as a counter
// that matches this process's hook runs.
package jsonfile

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"

	"github.com/flockd/flock/internal/atomicfile"
	"github.com/flockd/flock/peerfinder/sink"
)

// Options configure a Sink. Only Path is required.
type Options struct {
	// Path is the file written.
	Path string
	// Perm is the mode of a newly created file; 0644 when zero.
	Perm fs.FileMode
	// WriteMode selects atomic replace (default: with in-place fallback for
	// mount points).
	WriteMode atomicfile.Mode
	// Logger receives debug records about writes; slog.Default() when nil.
	Logger *slog.Logger
}

// Sink writes the document. It implements sink.Sink.
type Sink struct {
	opts Options
	log  *slog.Logger
}

var _ sink.Sink = (*Sink)(nil)

// New returns a Sink writing opts.Path.
func New(opts Options) (*Sink, error) {
	if opts.Path == "" {
		return nil, errors.New("json file: no path")
	}
	if opts.Perm == 0 {
		opts.Perm = 0o644
	}
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	return &Sink{opts: opts, log: log.With("sink", "json-file", "path", opts.Path)}, nil
}

// Apply writes the document for d unless the file already holds the same
// content (generation aside), once.
func (s *Sink) Apply(ctx context.Context, d sink.Delivery) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	out, err := sink.MarshalDocument(d)
	if err != nil {
		return fmt.Errorf("json file: %w", err)
	}
	res, err := atomicfile.Update(ctx, s.opts.Path, s.opts.Perm, s.opts.WriteMode, func(current []byte) ([]byte, error) {
		if !Replaceable(current) {
			return nil, fmt.Errorf("refusing to replace %s: not a peer document (written by someone else, or -json-file names another file)", s.opts.Path)
		}
		if SameContent(current, out) {
			return current, nil // keep the generation the content was first written at
		}
		return out, nil
	})
	if err != nil {
		return fmt.Errorf("json file: %w", err)
	}
	s.log.Debug("json file applied", "result", res, "generation", d.Generation, "peers", d.Set.Len())
	return nil
}

// Replaceable reports whether content is a file the sink may replace: empty
// or blank (created beforehand, or an in-place rewrite's padding), or a peer
// document of any version (a JSON object with version, self and peers).
// Anything else was not written by a JSON file sink: a hosts file given to
// -json-file, a co-tenant's file. It is pure.
func Replaceable(content []byte) bool {
	if len(bytes.TrimSpace(content)) == 0 {
		return true
	}
	var doc struct {
		Version *int            `json:"version"`
		Self    *string         `json:"self"`
		Peers   json.RawMessage `json:"peers"`
	}
	return json.Unmarshal(content, &doc) == nil && doc.Version != nil && doc.Self != nil &&
		bytes.HasPrefix(bytes.TrimSpace(doc.Peers), []byte("["))
}

// SameContent reports whether two encoded documents hold the same content
// apart from their generation. Anything that does not decode as a document of
// the current version differs. It is pure.
func SameContent(old, new []byte) bool {
	if bytes.Equal(old, new) {
		return true
	}
	var o, n sink.Document
	if json.Unmarshal(old, &o) != nil || json.Unmarshal(new, &n) != nil || o.Version != sink.DocumentVersion {
		return false
	}
	o.Generation = n.Generation
	a, errA := json.Marshal(o)
	b, errB := json.Marshal(n)
	return errA == nil && errB == nil && bytes.Equal(a, b)
}
