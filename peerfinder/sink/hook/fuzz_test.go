package hook_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/flockd/flock/peerfinder/sink/hook"
)

// FuzzParseCommand: an accepted command has a program to run, and quoting
// its words back for a shell gives the same argv (the split has no loss).
func FuzzParseCommand(f *testing.F) {
	f.Add(`"/work-dir/on-start.sh"`)
	f.Add(`/bin/sh -c 'echo "$X" # not a comment'`)
	f.Add(`a\ b "c d" 'e'"f"`)
	f.Add(`  # only a comment`)
	f.Add(`"unterminated`)
	f.Fuzz(func(t *testing.T, s string) {
		argv, err := hook.ParseCommand(s)
		if err != nil {
			return
		}
		if len(argv) == 0 || argv[0] == "" {
			t.Fatalf("ParseCommand(%q) = %q: no program", s, argv)
		}
		quoted := make([]string, len(argv))
		for i, a := range argv {
			quoted[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
		}
		back, err := hook.ParseCommand(strings.Join(quoted, " "))
		if err != nil || !slices.Equal(back, argv) {
			t.Fatalf("ParseCommand(%q) = %q; quoted back it gives %q, %v", s, argv, back, err)
		}
	})
}
