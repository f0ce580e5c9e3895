// Command flock-cluster builds, starts and stops the local Kubernetes control
// plane that flock's demo and integration tests run against.
//
//	flock-cluster build             build (or reuse) the cached component binaries
//	flock-cluster up                start the cluster, or reuse a running one; print env
//	flock-cluster env               print the env of the running cluster
//	flock-cluster down              stop exactly the processes "up" started
//	flock-cluster status            components, pids, memory and logs of the running cluster
//	flock-cluster exec -- CMD ARGS  run CMD with the cluster env; a cluster started
//	                                for it is stopped afterwards once no one uses it
//	flock-cluster node stop NAME    stop a real node's kubelet (containers keep running)
//	flock-cluster node kill NAME    SIGKILL all of a real node at once (power loss; data stays)
//	flock-cluster node start NAME   bring a stopped or killed real node back
//	flock-cluster node add          add one more real node (the next free real-<i>) to the
//	                                running cluster; returns once it is Ready
//
// Progress and logs go to stderr; stdout carries only "export" lines a shell
// can eval: eval "$(flock-cluster up)".
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/flockd/flock/internal/version"
	"github.com/flockd/flock/localcluster"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:])
	stop()
	os.Exit(code)
}

type config struct {
	cmd     string
	args    []string
	opts    localcluster.Options
	verbose bool
	version bool
}

func parseArgs(args []string) (config, error) {
	var c config
	fs := flag.NewFlagSet("flock-cluster", flag.ContinueOnError)
	fs.StringVar(&c.opts.StateDir, "state-dir", "", "cluster state dir (default $FLOCK_STATE_DIR, else <repo>/.state/cluster)")
	fs.IntVar(&c.opts.Nodes, "nodes", 4, "simulated nodes")
	fs.IntVar(&c.opts.Zones, "zones", 2, "zones the nodes are spread over")
	fs.DurationVar(&c.opts.ReadyDelay, "ready-delay", 500*time.Millisecond, "how long a started pod stays not ready")
	fs.IntVar(&c.opts.RealNodes, "real-nodes", localcluster.RealNodesFromEnv(),
		"real nodes (kubelet, containerd) to start when root and free on this machine; 0 = none; default from $FLOCK_REAL_NODES")
	fs.BoolVar(&c.verbose, "v", false, "debug logging")
	fs.BoolVar(&c.version, "version", false, "print the version, commit and Go version, then exit")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: flock-cluster [flags] build|up|env|down|status|exec -- CMD ARGS...|node stop|kill|start NAME|node add")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if c.version {
		return c, nil
	}
	if c.opts.RealNodes < 0 {
		return c, fmt.Errorf("-real-nodes: %d is negative", c.opts.RealNodes)
	}
	if fs.NArg() < 1 {
		fs.Usage()
		return c, errors.New("missing command")
	}
	c.cmd, c.args = fs.Arg(0), fs.Args()[1:]
	if len(c.args) > 0 && c.args[0] == "--" {
		c.args = c.args[1:]
	}
	switch c.cmd {
	case "build", "up", "env", "down", "status":
		if len(c.args) > 0 {
			return c, fmt.Errorf("%s takes no arguments", c.cmd)
		}
	case "exec":
		if len(c.args) == 0 {
			return c, errors.New("exec needs a command")
		}
	case "node":
		if len(c.args) > 0 && c.args[0] == "add" {
			if len(c.args) > 1 {
				return c, errors.New("node add takes no name: it adds the next free real-<i>")
			}
			break
		}
		if len(c.args) != 2 {
			return c, errors.New("node needs a fault and a node name, or add: node stop|kill|start NAME, node add")
		}
		switch localcluster.NodeFault(c.args[0]) {
		case localcluster.NodeStop, localcluster.NodeKill, localcluster.NodeStart:
		default:
			return c, fmt.Errorf("node: unknown fault %q (stop, kill or start)", c.args[0])
		}
	default:
		fs.Usage()
		return c, fmt.Errorf("unknown command %q", c.cmd)
	}
	return c, nil
}

func run(ctx context.Context, args []string) int {
	c, err := parseArgs(args)
	if err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(os.Stderr, "flock-cluster:", err)
		}
		return 2
	}
	if c.version {
		version.Print(os.Stdout, "flock-cluster")
		return 0
	}
	level := slog.LevelInfo
	if c.verbose {
		level = slog.LevelDebug
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	code, err := c.exec(ctx, log)
	if err != nil {
		log.Error("flock-cluster failed", "command", c.cmd, "err", err)
	}
	return code
}

func (c config) exec(ctx context.Context, log *slog.Logger) (int, error) {
	wd, err := os.Getwd()
	if err != nil {
		return 1, err
	}
	root, err := localcluster.RepoRoot(wd)
	if err != nil {
		return 1, err
	}
	o := c.opts
	if o.CacheRoot, err = localcluster.CacheRoot(); err != nil {
		return 1, err
	}
	if o.StateDir == "" {
		o.StateDir = localcluster.DefaultStateDir(root)
	}
	o.Log, o.Progress = log, os.Stderr
	o.ImagesDir = filepath.Join(root, "bin", "images")
	switch c.cmd {
	case "build":
		return exit(localcluster.Build(ctx, localcluster.BuildOptions{RepoRoot: root, CacheRoot: o.CacheRoot, Progress: os.Stderr, Log: log}))
	case "up":
		s, started, err := localcluster.Up(ctx, o)
		if err != nil {
			return 1, err
		}
		if !started {
			fmt.Fprintf(os.Stderr, "local cluster already running (state %s)\n", s.StateDir)
		}
		printEnv(s, o.CacheRoot)
		return exit(localcluster.SetEphemeral(o.StateDir, false))
	case "env":
		s, err := localcluster.Load(o.StateDir)
		if err != nil {
			return 1, fmt.Errorf("%w: start it with \"make cluster-up\"", err)
		}
		printEnv(s, o.CacheRoot)
		return 0, nil
	case "down":
		return exit(localcluster.Down(ctx, o.StateDir, log))
	case "status":
		s, err := localcluster.Load(o.StateDir)
		if s == nil {
			return 1, err
		}
		printStatus(s)
		return exit(err)
	case "exec":
		return execWith(ctx, o, c.args, log)
	case "node":
		if c.args[0] == "add" {
			_, err := localcluster.AddRealNode(ctx, o)
			return exit(err)
		}
		return exit(localcluster.FaultNode(ctx, o.StateDir, c.args[1], localcluster.NodeFault(c.args[0])))
	}
	return 2, fmt.Errorf("unknown command %q", c.cmd)
}

// execWith runs args with the cluster's env. A cluster it had to start is
// marked ephemeral and stopped afterwards by the last user to let go.
func execWith(ctx context.Context, o localcluster.Options, args []string, log *slog.Logger) (int, error) {
	s, started, release, err := localcluster.Acquire(ctx, o)
	if err != nil {
		return 1, err
	}
	if started {
		if err := localcluster.SetEphemeral(o.StateDir, true); err != nil {
			release()
			return 1, err
		}
	}
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.Env = append(os.Environ(), s.Env(o.CacheRoot)...)
	runErr := cmd.Run() // SIGINT reaches the child through the terminal's process group
	release()
	stopped, err := localcluster.StopIfUnused(context.WithoutCancel(ctx), o.StateDir, log)
	if err != nil {
		log.Warn("stop local cluster", "err", err)
	} else if stopped {
		fmt.Fprintln(os.Stderr, "stopped the local cluster started for this command")
	}
	var exitErr *exec.ExitError
	switch {
	case errors.As(runErr, &exitErr):
		return exitErr.ExitCode(), nil // the command reported its own failure
	case runErr != nil:
		return 1, fmt.Errorf("run %s: %w", args[0], runErr)
	}
	return 0, nil
}

func printStatus(s *localcluster.State) {
	fmt.Printf("state %s, started %s, API %s, DNS %s\n", s.StateDir, s.Started.Format(time.RFC3339), s.Server, s.DNSAddr)
	var total int64
	for _, p := range s.Procs {
		rss, err := localcluster.RSS(p.Pid)
		state := fmt.Sprintf("%7.1f MiB", float64(rss)/(1<<20))
		switch {
		case p.Down:
			state, rss = "   down (fault)", 0
		case err != nil:
			state = "exited"
		}
		total += rss
		fmt.Printf("  %-24s pid %-8d %s  %s\n", p.Name, p.Pid, state, s.LogFile(p.Name))
	}
	fmt.Printf("  %-24s %-12s %7.1f MiB\n", "total", "", float64(total)/(1<<20))
	for _, n := range s.RealNodes {
		down := ""
		if n.Down != "" {
			down = " (" + n.Down + ")"
		}
		fmt.Printf("real node %s%s at %s, %s (dir %s)\n", n.Name, down, n.IP, n.Zone, n.Dir)
	}
	if len(s.RealNodes) > 0 {
		fmt.Printf("shared directory %s (%s on every real node)\n", s.RealNodes[0].Shared, localcluster.SharedDir)
	} else {
		fmt.Printf("no real nodes: %s\n", s.RealNodeSkipped)
	}
}

func printEnv(s *localcluster.State, cacheRoot string) {
	for _, kv := range s.Env(cacheRoot) {
		k, v, _ := strings.Cut(kv, "=")
		fmt.Printf("export %s=%s\n", k, shellQuote(v))
	}
}

// shellQuote quotes v for POSIX shells when it needs it.
func shellQuote(v string) string {
	if v != "" && strings.Trim(v, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-./:@+,=") == "" {
		return v
	}
	return "'" + strings.ReplaceAll(v, "'", `'\''`) + "'"
}

func exit(err error) (int, error) {
	if err != nil {
		return 1, err
	}
	return 0, nil
}
