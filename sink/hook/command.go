package hook

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/google/shlex"
)

// ParseCommand turns a hook flag value into an argv.
//
// When the trimmed value names an existing file that is not a directory, the
// argv is just that path, so a script whose name contains spaces runs as
// upstream peer-finder ran it; a bare file name gets a "./" prefix so that
// the file in the working directory runs rather than one found on $PATH.
// Otherwise the value is split by POSIX shell word rules: quotes and
// backslashes are removed, an unquoted # starts a comment, and nothing is
// expanded (no variables, globs or pipes; no shell runs the command). This
// lets -on-start='/hooks/zk.sh --id 1' pass arguments, and makes the value
// "/work-dir/on-start.sh" (with literal quotes, as Kubernetes' ZooKeeper
// manifest passes it through args:) run /work-dir/on-start.sh.
//
// An empty value, one with only a comment, or one with an unclosed quote is
// an error.
func ParseCommand(s string) ([]string, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil, errors.New("empty hook command")
	}
	if fi, err := os.Stat(s); err == nil && !fi.IsDir() {
		if !strings.Contains(s, "/") {
			s = "./" + s
		}
		return []string{s}, nil
	}
	argv, err := shlex.Split(s)
	if err != nil {
		return nil, fmt.Errorf("hook command %q: %w", s, err)
	}
	if len(argv) == 0 || argv[0] == "" {
		return nil, fmt.Errorf("hook command %q: no program to run", s)
	}
	return argv, nil
}
