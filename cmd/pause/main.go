// Command pause is the sandbox container of a pod (the image containerd's
// CRI runs first in every pod to hold its namespaces): it blocks until
// SIGINT or SIGTERM and then exits 0, and as pid 1 of a shared process
// namespace it reaps the zombies it inherits. It is Kubernetes' pause.c in
// Go, built static for ghcr.io/flockd/pause.
package main

import (
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/flockd/flock/internal/version"
)

func main() {
	flag.Usage = func() {
		fmt.Fprintln(flag.CommandLine.Output(), "usage: pause\n\nBlocks until SIGINT or SIGTERM, reaping zombie children; exits 0.")
	}
	showVersion := flag.Bool("version", false, "print the version, commit and Go version, then exit")
	flag.Parse()
	if flag.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "pause: unexpected argument %q\n", flag.Arg(0))
		os.Exit(2)
	}
	if *showVersion {
		version.Print(os.Stdout, "pause")
		return
	}
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGCHLD)
	if os.Getpid() != 1 {
		// Printed once the signals are handled (the tests wait for it).
		fmt.Fprintln(os.Stderr, "pause: warning: not pid 1, so orphans are not reaped here")
	}
	for sig := range sigs {
		if sig != syscall.SIGCHLD {
			os.Exit(0)
		}
		reap()
	}
}

// reap waits for every exited child. pause starts no children of its own,
// so every child is an orphan it inherited and a plain wait4(-1) loop is
// right here (unlike in peer-finder, see internal/reap).
func reap() {
	for {
		var ws unix.WaitStatus
		pid, err := unix.Wait4(-1, &ws, unix.WNOHANG, nil)
		if err == unix.EINTR {
			continue
		}
		if pid <= 0 || err != nil {
			return
		}
	}
}
