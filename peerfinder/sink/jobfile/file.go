package jobfile

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"

	"github.com/flockd/flock/internal/atomicfile"
	"github.com/flockd/flock/peerfinder/sink"
)

// File is a sink that writes what its render function returns for each
// delivery to one file, atomically (internal/atomicfile: a temporary file
// renamed over it, in place for a bind-mounted file); an unchanged file is
// not rewritten. A failed render or write leaves the file as it was. It
// replaces only an empty file or one its ours function recognises
// (IsHostfile, IsEnvFile): a hosts file or anything else at the path is
// left whole and Apply fails naming it, as the JSON file sink does.
type File struct {
	path   string
	name   string
	render func(sink.Delivery) ([]byte, error)
	ours   func([]byte) bool
	log    *slog.Logger
}

var _ sink.Sink = (*File)(nil)

// NewFile returns a File sink named name (its flag, for logs and errors)
// writing path, which replaces only an empty file or one ours recognises.
func NewFile(name, path string, render func(sink.Delivery) ([]byte, error), ours func([]byte) bool, log *slog.Logger) (*File, error) {
	if path == "" {
		return nil, fmt.Errorf("%s: no path", name)
	}
	if log == nil {
		log = slog.Default()
	}
	return &File{path: path, name: name, render: render, ours: ours, log: log.With("sink", name, "path", path)}, nil
}

// Apply renders d and writes the file, once.
func (f *File) Apply(ctx context.Context, d sink.Delivery) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	out, err := f.render(d)
	if err != nil {
		return fmt.Errorf("%s: %w", f.name, err)
	}
	res, err := atomicfile.Update(ctx, f.path, 0o644, atomicfile.Auto, func(current []byte) ([]byte, error) {
		if len(bytes.TrimSpace(current)) > 0 && !f.ours(current) {
			return nil, fmt.Errorf("refusing to replace %s: not what -%s writes (written by someone else, or -%s names another file)", f.path, f.name, f.name)
		}
		return out, nil
	})
	if err != nil {
		return fmt.Errorf("%s: %w", f.name, err)
	}
	f.log.Debug("job file applied", "result", res, "generation", d.Generation, "bytes", len(out))
	return nil
}

// MPI renders the MPI hostfile.
type MPI struct {
	Ranker Ranker
	Slots  Slots

	mu    sync.Mutex
	known map[string]int // with Auto, the last slot count seen for each name
}

// Render returns the hostfile for d. With Auto slots it remembers each
// name's count, so a member between two pods keeps it.
func (m *MPI) Render(d sink.Delivery) ([]byte, error) {
	members := m.Ranker.Order(d.Set)
	if len(members) == 0 {
		return nil, errors.New("no member has a name to list (see -mpi-roles and -hosts-name-template)")
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.known == nil {
		m.known = map[string]int{}
	}
	out := RenderHostfile(members, m.Slots, m.known)
	for _, mb := range members {
		if mb.Peer != nil && mb.Peer.CPUMillicores > 0 {
			m.known[mb.Name] = m.Slots.Of(mb, nil)
		}
	}
	return out, nil
}

// Rendezvous renders a framework's rendezvous variables.
type Rendezvous struct {
	Ranker    Ranker
	Framework Framework
	Port      int
}

// Vars returns the variables for d: the members ranked, this member's
// rank from d.Self.
func (r Rendezvous) Vars(d sink.Delivery) ([]Var, error) {
	members := r.Ranker.Order(d.Set)
	if len(members) == 0 {
		return nil, errors.New("no member has a name to rank (see -rendezvous-roles and -hosts-name-template)")
	}
	return r.Framework.Env(members, Self(members, d.Self), r.Port)
}

// Render returns the environment file for d (RenderEnvFile).
func (r Rendezvous) Render(d sink.Delivery) ([]byte, error) {
	vars, err := r.Vars(d)
	if err != nil {
		return nil, err
	}
	return RenderEnvFile(vars), nil
}

// Environ returns the variables for d as "NAME=value" strings, for the
// -- command's environment: exec calls it once, with the delivery that
// starts the command, since a running process's environment cannot change.
func (r Rendezvous) Environ(d sink.Delivery) ([]string, error) {
	vars, err := r.Vars(d)
	if err != nil {
		return nil, fmt.Errorf("rendezvous: %w", err)
	}
	return Environ(vars), nil
}
