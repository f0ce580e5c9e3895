// Command peer-finder discovers the peers of a stateful workload and hands
// them to the application. It is a drop-in replacement for Kubernetes'
// test/images/pets/peer-finder; see README.md for the flags.
package main

import (
	"context"
	"os"

	"github.com/flockd/flock/peerfinder"
)

func main() {
	os.Exit(peerfinder.Main(context.Background(), os.Args[1:], peerfinder.OSEnv(), os.Stdout, os.Stderr))
}
