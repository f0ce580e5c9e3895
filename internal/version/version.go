// Package version says which build of flock is running: the release
// version and commit stamped by the build (make build, make images, make
// release pass -ldflags "-X ...version.version=v0.1.0 -X ...version.commit=<sha>"),
// else what the Go toolchain recorded in the binary (runtime/debug).
package version

import (
	"fmt"
	"io"
	"runtime"
	"runtime/debug"

	"github.com/prometheus/client_golang/prometheus"
)

// Set with -ldflags -X; empty in a plain go build or go test.
var (
	version string
	commit  string
)

// Info identifies a build.
type Info struct {
	Version   string // e.g. v0.1.0; "(devel)" when neither -ldflags nor the module says
	Commit    string // the source commit, "-dirty" appended for uncommitted changes; "unknown" when not recorded
	GoVersion string // the toolchain, e.g. go1.26.8
	Platform  string // GOOS/GOARCH
}

// Get returns this binary's build information.
func Get() Info {
	bi, _ := debug.ReadBuildInfo()
	return get(bi, version, commit)
}

// get is Get with its inputs: the ldflags values win over the build info
// (go build records the VCS state only with -buildvcs, not in go run or
// go test, and not for a worktree built with -buildvcs=false).
func get(bi *debug.BuildInfo, version, commit string) Info {
	i := Info{Version: version, Commit: commit, GoVersion: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH}
	if bi != nil {
		i.GoVersion = bi.GoVersion
		if i.Version == "" && bi.Main.Version != "" {
			i.Version = bi.Main.Version
		}
		if i.Commit == "" {
			var rev, modified string
			for _, s := range bi.Settings {
				switch s.Key {
				case "vcs.revision":
					rev = s.Value
				case "vcs.modified":
					modified = s.Value
				}
			}
			if rev != "" && modified == "true" {
				rev += "-dirty"
			}
			i.Commit = rev
		}
	}
	if i.Version == "" {
		i.Version = "(devel)"
	}
	if i.Commit == "" {
		i.Commit = "unknown"
	}
	return i
}

// String is one line: "v0.1.0 commit=<sha> go=go1.26.8 platform=linux/amd64".
func (i Info) String() string {
	return fmt.Sprintf("%s commit=%s go=%s platform=%s", i.Version, i.Commit, i.GoVersion, i.Platform)
}

// Print writes what -version prints: the program's name and Get(), one line.
func Print(w io.Writer, program string) {
	fmt.Fprintf(w, "%s %s\n", program, Get())
}

// NewCollector returns the flock_build_info gauge: always 1, labelled with
// the version, commit and Go version (join it to other series with
// "* on(instance) group_left(version) flock_build_info").
func NewCollector() prometheus.Collector {
	i := Get()
	g := prometheus.NewGauge(prometheus.GaugeOpts{
		Name:        "flock_build_info",
		Help:        "Always 1; labelled with the build's version, commit and Go version.",
		ConstLabels: prometheus.Labels{"version": i.Version, "commit": i.Commit, "goversion": i.GoVersion},
	})
	g.Set(1)
	return g
}
