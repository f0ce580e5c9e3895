// Command flock-cluster builds, starts and stops the local Kubernetes control
// plane that flock's demo and integration tests run against.
//
//	flock-cluster build             build (or reuse) the cached component binaries
//	flock-cluster up                start the cluster, or reuse a running one; print env
//	flock-cluster env               print the env of the running cluster
//	flock-cluster down              stop the processes "up" started
//	flock-cluster exec -- CMD ARGS  run CMD with the cluster env, starting the cluster
//	                                for it (and stopping it afterwards) if none was running
//
// Progress and logs go to stderr; stdout carries only "export" lines a shell can eval.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/flockd/flock/internal/localcluster"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:])
	stop()
	os.Exit(code)
}

func run(ctx context.Context, args []string) int {
	fs := flag.NewFlagSet("flock-cluster", flag.ContinueOnError)
	verbose := fs.Bool("v", false, "debug logging")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: flock-cluster [-v] build|up|env|down|exec -- CMD ARGS...")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return 2
	}
	level := slog.LevelInfo
	if *verbose {
		level = slog.LevelDebug
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	if fs.NArg() < 1 {
		fs.Usage()
		return 2
	}
	cacheRoot, err := localcluster.CacheRoot()
	if err != nil {
		log.Error("cache dir", "err", err)
		return 1
	}
	wd, err := os.Getwd()
	if err != nil {
		log.Error("working dir", "err", err)
		return 1
	}
	switch cmd := fs.Arg(0); cmd {
	case "build":
		root, err := localcluster.RepoRoot(wd)
		if err == nil {
			err = localcluster.Build(ctx, localcluster.BuildOptions{RepoRoot: root, CacheRoot: cacheRoot, Progress: os.Stderr, Log: log})
		}
		if err != nil {
			log.Error("build failed", "err", err)
			return 1
		}
		return 0
	default:
		fs.Usage()
		log.Error("unknown command", "command", cmd, "err", errors.ErrUnsupported)
		return 2
	}
}
