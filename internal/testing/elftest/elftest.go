// Package elftest makes broken executables for tests of what can run.
package elftest

import (
	"bytes"
	"debug/elf"
	"fmt"
	"os"
	"testing"

	"github.com/flockd/flock/internal/testing/need"
)

// WithInterp returns a copy of the dynamically linked ELF at path whose
// PT_INTERP names interp (no longer than the original).
func WithInterp(t testing.TB, path, interp string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	f, err := elf.NewFile(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range f.Progs {
		if p.Type != elf.PT_INTERP {
			continue
		}
		if uint64(len(interp)) >= p.Filesz {
			t.Fatalf("%s: interpreter %q longer than the original", path, interp)
		}
		seg := b[p.Off : p.Off+p.Filesz]
		clear(seg)
		copy(seg, interp)
		return b
	}
	need.Unavailable(t, "root", fmt.Sprintf("%s has no PT_INTERP (statically linked)", path))
	return nil
}
