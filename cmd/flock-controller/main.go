// Command flock-controller runs the controller of the flockd.io Flock
// resource: stable member names, and node-pinned storage on clusters
// without network storage.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path"
	"strings"
	"syscall"

	"github.com/go-logr/logr"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/flockd/flock/controller"
	"github.com/flockd/flock/internal/version"
)

// config is the parsed command line.
type config struct {
	kubeconfig  string
	manager     controller.ManagerOptions
	logFormat   string
	logLevel    slog.Level
	showVersion bool
}

// parseArgs parses the command line into a config.
func parseArgs(args []string, stderr io.Writer) (config, error) {
	var c config
	fs := flag.NewFlagSet("flock-controller", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&c.kubeconfig, "kubeconfig", "", "path to a kubeconfig; default: in-cluster config, then $KUBECONFIG, then ~/.kube/config")
	fs.StringVar(&c.manager.MetricsAddr, "metrics-bind-address", ":8443", `address of the Prometheus /metrics endpoint; "0" disables it`)
	fs.BoolVar(&c.manager.MetricsSecure, "metrics-secure", true, "serve /metrics over HTTPS to clients with a Kubernetes token allowed to get /metrics; false: plain HTTP for anyone (then bind it to 127.0.0.1)")
	fs.StringVar(&c.manager.ProbeAddr, "health-probe-bind-address", ":8081", `address of /healthz and /readyz; "0" disables them`)
	fs.BoolVar(&c.manager.LeaderElection, "leader-elect", true, "elect a leader so that only one replica reconciles")
	fs.StringVar(&c.manager.LeaderElectionNamespace, "leader-election-namespace", "", "namespace of the leader election Lease (default: the pod's namespace; required out of cluster)")
	fs.StringVar(&c.manager.Namespace, "namespace", "", "reconcile only the Flocks of this namespace (default: all namespaces)")
	paths := fs.String("allowed-storage-paths", "/var/lib/flock", `comma-separated host directories NodePinned Flocks may keep data in (storage.local.path equal or below one); "*" allows any path`)
	fs.StringVar(&c.logFormat, "log-format", "text", "log format: text or json")
	fs.TextVar(&c.logLevel, "log-level", slog.LevelInfo, "log level: debug, info, warn or error")
	fs.BoolVar(&c.showVersion, "version", false, "print the version, commit and Go version, then exit")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if fs.NArg() > 0 {
		return c, fmt.Errorf("unexpected arguments: %q", fs.Args())
	}
	if *paths != "*" {
		c.manager.AllowedStoragePaths = []string{}
		for _, p := range strings.Split(*paths, ",") {
			if p = strings.TrimSpace(p); p == "" || !path.IsAbs(p) || path.Clean(p) != p || p == "/" {
				return c, fmt.Errorf("-allowed-storage-paths: %q is not a clean absolute directory other than / (use \"*\" to allow any path)", p)
			}
			c.manager.AllowedStoragePaths = append(c.manager.AllowedStoragePaths, p)
		}
	}
	if c.logFormat != "text" && c.logFormat != "json" {
		return c, fmt.Errorf("-log-format=%q: want text or json", c.logFormat)
	}
	return c, nil
}

func main() {
	c, err := parseArgs(os.Args[1:], os.Stderr)
	if errors.Is(err, flag.ErrHelp) {
		os.Exit(0)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "flock-controller:", err)
		os.Exit(2)
	}
	if c.showVersion {
		version.Print(os.Stdout, "flock-controller")
		return
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, c); err != nil {
		slog.Error("flock-controller stopped", "err", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, c config) error {
	opts := &slog.HandlerOptions{Level: c.logLevel}
	var h slog.Handler = slog.NewTextHandler(os.Stderr, opts)
	if c.logFormat == "json" {
		h = slog.NewJSONHandler(os.Stderr, opts)
	}
	slog.SetDefault(slog.New(h))
	logger := logr.FromSlogHandler(h)
	ctrl.SetLogger(logger)
	c.manager.Logger = logger

	cfg, err := restConfig(c.kubeconfig)
	if err != nil {
		return err
	}
	mgr, err := controller.NewManager(cfg, c.manager)
	if err != nil {
		return err
	}
	logger.Info("starting", "metrics", c.manager.MetricsAddr, "probes", c.manager.ProbeAddr, "leaderElection", c.manager.LeaderElection)
	if err := mgr.Start(ctx); err != nil {
		return fmt.Errorf("run manager: %w", err)
	}
	return nil
}

func restConfig(kubeconfig string) (*rest.Config, error) {
	if kubeconfig == "" {
		cfg, err := ctrl.GetConfig()
		if err != nil {
			return nil, fmt.Errorf("load kubernetes config: %w", err)
		}
		return cfg, nil
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("load kubeconfig %s: %w", kubeconfig, err)
	}
	return cfg, nil
}
