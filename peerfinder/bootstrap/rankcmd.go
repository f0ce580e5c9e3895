package bootstrap

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"strings"
	"time"
)

// RankCommand returns a function that runs argv (without a shell) and
// parses its standard output with ParseRank: -form-rank's command. A
// failure names the command, its exit status and the last line it wrote to
// standard error.
func RankCommand(argv []string) func(context.Context) (int64, error) {
	return func(ctx context.Context) (int64, error) {
		var stdout, stderr bytes.Buffer
		cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		cmd.WaitDelay = 5 * time.Second
		if err := cmd.Run(); err != nil {
			if line := lastLine(stderr.String()); line != "" {
				return 0, fmt.Errorf("rank command %s: %w: %s", argv[0], err, line)
			}
			return 0, fmt.Errorf("rank command %s: %w", argv[0], err)
		}
		n, err := ParseRank(stdout.String())
		if err != nil {
			return 0, fmt.Errorf("rank command %s: %w", argv[0], err)
		}
		return n, nil
	}
}

// lastLine is s's last non-blank line, at most 200 bytes of it.
func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	line := strings.TrimSpace(lines[len(lines)-1])
	if len(line) > 200 {
		line = line[len(line)-200:]
	}
	return line
}
