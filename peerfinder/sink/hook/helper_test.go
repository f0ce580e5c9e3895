package hook_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/flockd/flock/internal/testing/await"
	"github.com/flockd/flock/peerfinder/sink"
	"github.com/flockd/flock/peerfinder/sink/hook"
)

// helperEnv makes the test binary act as a hook (the helper-process
// pattern): argv is [test binary, mode, args...].
const helperEnv = "FLOCK_HOOK_TEST_HELPER"

func TestMain(m *testing.M) {
	if os.Getenv(helperEnv) == "1" {
		os.Exit(helperMain(os.Args[1:]))
	}
	goleak.VerifyTestMain(m)
}

// helper returns the argv that runs the test binary in the given mode.
func helper(mode string, args ...string) []string {
	return append([]string{os.Args[0], mode}, args...)
}

// helperMain implements the helper modes. It returns the exit status.
func helperMain(args []string) int {
	mode, args := args[0], args[1:]
	switch mode {
	case "stdin-to-file": // copy stdin to args[0]
		b, err := io.ReadAll(os.Stdin)
		if err != nil {
			return 10
		}
		return writeFile(args[0], b)
	case "env-to-file": // write the PEER_FINDER_* and EXTRA variables as JSON to args[0]
		env := map[string]string{}
		for _, kv := range os.Environ() {
			k, v, _ := strings.Cut(kv, "=")
			if strings.HasPrefix(k, "PEER_FINDER_") || k == "EXTRA" {
				env[k] = v
			}
			if strings.HasPrefix(k, "PEER_FINDER_") && strings.HasSuffix(k, "_FILE") {
				b, err := os.ReadFile(v) // removed after the run: read it now
				if err != nil {
					return 14
				}
				env[k+":content"] = string(b)
			}
		}
		b, _ := json.Marshal(env)
		return writeFile(args[0], b)
	case "exit": // print one line on each stream, exit with status args[0]
		fmt.Println("about to fail")
		fmt.Fprintln(os.Stderr, "failing")
		n, _ := strconv.Atoi(args[0])
		return n
	case "output":
		fmt.Print("hello\r\n\nworld")
		fmt.Fprint(os.Stderr, "oops\n")
		return 0
	case "flood": // write args[0] lines of 99 'x' and a newline to stdout, one line to stderr
		n, _ := strconv.Atoi(args[0])
		line := strings.Repeat("x", 99) + "\n"
		w := bufio.NewWriterSize(os.Stdout, 1<<16)
		for range n {
			_, _ = w.WriteString(line)
		}
		_ = w.Flush()
		fmt.Fprintln(os.Stderr, "done")
		return 0
	case "discard": // read and drop stdin
		if _, err := io.Copy(io.Discard, os.Stdin); err != nil {
			return 10
		}
		return 0
	case "never-read":
		return 0
	case "slow-read": // read stdin in small pieces, write the byte count to args[0]
		buf := make([]byte, 4096)
		n := 0
		for {
			k, err := os.Stdin.Read(buf)
			n += k
			if err != nil {
				break
			}
			time.Sleep(time.Millisecond)
		}
		return writeFile(args[0], []byte(strconv.Itoa(n)))
	case "hang": // start a grandchild, write its pid to args[0], sleep; args[1] "ignore-term"
		ignore := len(args) > 1 && args[1] == "ignore-term"
		gc := exec.Command(os.Args[0], "sleep", strconv.FormatBool(ignore))
		if err := gc.Start(); err != nil {
			return 11
		}
		if ignore {
			signal.Ignore(syscall.SIGTERM)
		}
		if rc := writeFile(args[0], []byte(strconv.Itoa(gc.Process.Pid))); rc != 0 {
			return rc
		}
		time.Sleep(time.Hour)
		return 0
	case "background": // leave a grandchild holding stdout, write its pid to args[0]
		gc := exec.Command(os.Args[0], "sleep", "false")
		gc.Stdout, gc.Stderr = os.Stdout, os.Stderr
		if err := gc.Start(); err != nil {
			return 11
		}
		fmt.Println("started")
		return writeFile(args[0], []byte(strconv.Itoa(gc.Process.Pid)))
	case "hang-child-ignores-term": // start a grandchild that ignores SIGTERM and writes its pid to args[0], sleep obeying SIGTERM
		gc := exec.Command(os.Args[0], "ignore-term-and-sleep", args[0])
		if err := gc.Start(); err != nil {
			return 11
		}
		time.Sleep(time.Hour)
		return 0
	case "ignore-term-and-sleep": // ignore SIGTERM, then write the pid to args[0] (so it is written only once SIGTERM is ignored), sleep
		signal.Ignore(syscall.SIGTERM)
		if rc := writeFile(args[0], []byte(strconv.Itoa(os.Getpid()))); rc != 0 {
			return rc
		}
		time.Sleep(time.Hour)
		return 0
	case "sleep": // sleep; args[0] "true" ignores SIGTERM
		if args[0] == "true" {
			signal.Ignore(syscall.SIGTERM)
		}
		time.Sleep(time.Hour)
		return 0
	}
	fmt.Fprintf(os.Stderr, "unknown helper mode %q\n", mode)
	return 99
}

func writeFile(path string, b []byte) int {
	// Write to a temporary name and rename, so a reader never sees a
	// partial file.
	if err := os.WriteFile(path+".tmp", b, 0o644); err != nil {
		return 12
	}
	if err := os.Rename(path+".tmp", path); err != nil {
		return 13
	}
	return 0
}

// apply runs h.Apply with a deadline: a hook that is never stopped (a
// broken timeout or kill) fails the test instead of hanging it.
func apply(t *testing.T, h *hook.Hook, ctx context.Context, d sink.Delivery) error {
	t.Helper()
	errc := make(chan error, 1)
	go func() { errc <- h.Apply(ctx, d) }()
	return await.Recv(t, errc, "Apply to return")
}
