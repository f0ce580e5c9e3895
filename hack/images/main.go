// Command images writes flock's OCI image archives (peer-finder,
// flock-controller, pause) from binaries that `make images` built into
// <bin>/<arch>/, and with -apps the application images from the local
// cluster's cached binaries. See internal/images and README.md's Images
// section.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/flockd/flock/internal/images"
	"github.com/flockd/flock/localcluster"
)

func main() {
	home, _ := os.UserHomeDir()
	o := images.Options{}
	fs := flag.NewFlagSet("images", flag.ContinueOnError)
	fs.StringVar(&o.Repo, "repo", "ghcr.io/flockd", "image repository prefix")
	fs.StringVar(&o.Tag, "tag", "dev", "image tag: the version")
	aliases := fs.String("aliases", "", "comma-separated further tags of the same images (make images: dev)")
	arches := fs.String("arches", "amd64,arm64", "comma-separated GOARCH values")
	fs.StringVar(&o.BinDir, "bin", "bin", "directory holding <arch>/<binary>")
	fs.StringVar(&o.OutDir, "out", "bin/images", "directory the archives are written to")
	fs.StringVar(&o.DebCache, "deb-cache", filepath.Join(home, ".cache", "flock", "debs"), "cache of Debian packages")
	epoch := fs.String("source-date-epoch", os.Getenv("SOURCE_DATE_EPOCH"), "creation time and mtime of every file, in Unix seconds (default $SOURCE_DATE_EPOCH, else 0)")
	fs.StringVar(&o.Revision, "revision", "", "source commit recorded in the images")
	apps := fs.Bool("apps", false, "also build the application images (ghcr.io/flockd/apps/*, this machine's architecture) from the local cluster's cached binaries (make cluster-build) and Debian packages")
	torch := fs.Bool("torch", false, "build only the torch application image (ghcr.io/flockd/apps/torch, this machine's architecture; make test-torch), not the others")
	if err := fs.Parse(os.Args[1:]); err != nil {
		os.Exit(2)
	}
	secs := int64(0)
	if *epoch != "" {
		var err error
		if secs, err = strconv.ParseInt(*epoch, 10, 64); err != nil {
			fmt.Fprintf(os.Stderr, "invalid -source-date-epoch %q: %v\n", *epoch, err)
			os.Exit(2)
		}
	}
	o.Created = time.Unix(secs, 0).UTC()
	if *aliases != "" {
		o.Aliases = strings.Split(*aliases, ",")
	}
	o.Arches = strings.Split(*arches, ",")
	for _, a := range o.Arches {
		if !images.Supported(a) {
			fmt.Fprintf(os.Stderr, "invalid -arches: %q is not amd64 or arm64\n", a)
			os.Exit(2)
		}
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if *torch {
		if err := buildTorch(ctx, o); err != nil {
			slog.Error("torch image failed", "err", err)
			os.Exit(1)
		}
		return
	}
	if _, err := images.Build(ctx, o); err != nil {
		slog.Error("images failed", "err", err)
		os.Exit(1)
	}
	if *apps {
		if err := buildApps(ctx, o); err != nil {
			slog.Error("application images failed", "err", err)
			os.Exit(1)
		}
	}
}

// buildApps builds the application images from the cached binaries of the
// local cluster's components.
func buildApps(ctx context.Context, o images.Options) error {
	cache, err := localcluster.CacheRoot()
	if err != nil {
		return err
	}
	bin := func(component, name string) string {
		for _, c := range localcluster.Components {
			if c.Name == component {
				return c.Bin(cache, name)
			}
		}
		panic("no component " + component)
	}
	_, err = images.BuildApps(ctx, images.AppOptions{
		Options: o, Arch: runtime.GOARCH,
		Etcd: bin("etcd", "etcd"), Etcdctl: bin("etcdctl", "etcdctl"), UpstreamPeerFinder: localcluster.UpstreamPeerFinder(cache),
	})
	return err
}

// buildTorch builds the torch image alone: it is too large to build with
// the other application images at every make images.
func buildTorch(ctx context.Context, o images.Options) error {
	if err := os.MkdirAll(o.OutDir, 0o755); err != nil {
		return fmt.Errorf("torch image: %w", err)
	}
	_, err := images.BuildTorch(ctx, images.AppOptions{Options: o, Arch: runtime.GOARCH})
	return err
}
