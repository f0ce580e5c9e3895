// Command flock-demo shows peer-finder tracking a StatefulSet on the local
// cluster: one peer-finder per member, each member's hook deliveries printed
// live while the StatefulSet scales 3 -> 5 -> 2. Run it with "make demo", which
// provides the cluster (KUBECONFIG, FLOCK_DNS, FLOCK_CLUSTER_DOMAIN).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/flockd/flock/internal/version"
	"github.com/flockd/flock/localcluster"
	"github.com/flockd/flock/localcluster/demo"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:])
	stop()
	var ue usageError
	switch {
	case errors.Is(err, errVersion):
		version.Print(os.Stdout, "flock-demo")
	case errors.Is(err, flag.ErrHelp):
	case errors.As(err, &ue):
		fmt.Fprintln(os.Stderr, "flock-demo:", err)
		os.Exit(2)
	case err != nil:
		slog.Error("demo failed", "err", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string) error {
	wd, err := os.Getwd()
	if err != nil {
		return err
	}
	root, err := localcluster.RepoRoot(wd)
	if err != nil {
		return err
	}
	c := demo.Config{Out: os.Stdout, StepTimeout: 60 * time.Second}
	var steps string
	fs := flag.NewFlagSet("flock-demo", flag.ContinueOnError)
	fs.StringVar(&c.PeerFinder, "peer-finder", filepath.Join(root, "bin", "peer-finder"), "peer-finder binary")
	fs.StringVar(&c.HookDir, "hooks", filepath.Join(root, "examples", "demo"), "directory with on-start.sh and on-change.sh")
	fs.StringVar(&c.LogDir, "log-dir", filepath.Join(root, ".state", "demo"), "where member logs go (emptied first)")
	fs.StringVar(&steps, "steps", "3,5,2", "replica counts, in order")
	fs.DurationVar(&c.StepTimeout, "step-timeout", c.StepTimeout, "how long members may take to agree after a step")
	fs.DurationVar(&c.Pause, "pause", 2*time.Second, "pause after each step")
	mode := fs.String("mode", "auto", "members as real pods on the real nodes (real), as peer-finder processes here beside simulated pods (simulated), or real when the cluster has real nodes (auto)")
	image := fs.String("image", "ghcr.io/flockd/peer-finder:dev", "peer-finder image for real pods")
	showVersion := fs.Bool("version", false, "print the version, commit and Go version, then exit")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return usageError{err}
	}
	if *showVersion {
		return errVersion
	}
	for _, s := range strings.Split(steps, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 1 {
			return usageError{fmt.Errorf("-steps: %q is not a positive number", s)}
		}
		c.Steps = append(c.Steps, n)
	}
	kubeconfig, dnsAddr := os.Getenv("KUBECONFIG"), os.Getenv("FLOCK_DNS")
	if kubeconfig == "" || dnsAddr == "" {
		return errors.New("KUBECONFIG and FLOCK_DNS must point at the local cluster: run via \"make demo\" or after eval \"$(make -s cluster-up)\"")
	}
	c.DNSAddr = dnsAddr
	if c.Domain = os.Getenv("FLOCK_CLUSTER_DOMAIN"); c.Domain == "" {
		c.Domain = localcluster.Domain
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return fmt.Errorf("load kubeconfig: %w", err)
	}
	if c.Client, err = kubernetes.NewForConfig(cfg); err != nil {
		return fmt.Errorf("client: %w", err)
	}
	real := *mode == "real"
	switch *mode {
	case "auto":
		s, err := localcluster.Load(localcluster.DefaultStateDir(root))
		real = err == nil && len(s.RealNodes) > 0
	case "real", "simulated":
	default:
		return usageError{fmt.Errorf("-mode: %q is not auto, real or simulated", *mode)}
	}
	if real {
		c.Image = *image
	}
	if c.HookDir, err = filepath.Abs(c.HookDir); err != nil {
		return err
	}
	fi, err := os.Stdout.Stat()
	c.Color = err == nil && fi.Mode()&os.ModeCharDevice != 0 && os.Getenv("NO_COLOR") == ""
	return demo.Run(ctx, c)
}

// errVersion asks main to print the version.
var errVersion = errors.New("version requested")

// usageError is a bad command line: exit status 2.
type usageError struct{ error }
