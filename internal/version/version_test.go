package version

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestGet(t *testing.T) {
	vcs := &debug.BuildInfo{GoVersion: "go1.99", Main: debug.Module{Version: "v0.0.0-20260101000000-abcdef123456"},
		Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "abcdef123456"}, {Key: "vcs.modified", Value: "true"}}}
	tests := []struct {
		name            string
		bi              *debug.BuildInfo
		version, commit string
		want            Info
	}{
		{"ldflags win", vcs, "v0.1.0", "1234", Info{"v0.1.0", "1234", "go1.99", runtime.GOOS + "/" + runtime.GOARCH}},
		{"build info only", vcs, "", "", Info{"v0.0.0-20260101000000-abcdef123456", "abcdef123456-dirty", "go1.99", runtime.GOOS + "/" + runtime.GOARCH}},
		{"clean tree", &debug.BuildInfo{GoVersion: "go1.99", Main: debug.Module{Version: "(devel)"},
			Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "abc"}, {Key: "vcs.modified", Value: "false"}}}, "", "",
			Info{"(devel)", "abc", "go1.99", runtime.GOOS + "/" + runtime.GOARCH}},
		{"nothing recorded", nil, "", "", Info{"(devel)", "unknown", runtime.Version(), runtime.GOOS + "/" + runtime.GOARCH}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := get(tt.bi, tt.version, tt.commit); got != tt.want {
				t.Errorf("get = %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestCollector(t *testing.T) {
	i := Get()
	want := `# HELP flock_build_info Always 1; labelled with the build's version, commit and Go version.
# TYPE flock_build_info gauge
flock_build_info{commit="` + i.Commit + `",goversion="` + i.GoVersion + `",version="` + i.Version + `"} 1
`
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(NewCollector())
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "flock_build_info"); err != nil {
		t.Error(err)
	}
}

// TestEveryBinaryPrintsVersion builds every command under cmd/ as the
// Makefile does (version and commit stamped with -ldflags) and runs it
// with -version: one line naming the program, the version, the commit and
// the Go version, status 0. A new command without -version fails here.
func TestEveryBinaryPrintsVersion(t *testing.T) {
	if testing.Short() {
		t.Skip("builds every binary")
	}
	root := filepath.Join("..", "..")
	dirs, err := filepath.Glob(filepath.Join(root, "cmd", "*", "main.go"))
	if err != nil || len(dirs) < 5 {
		t.Fatalf("cmd/*/main.go: %v %v", dirs, err)
	}
	out := t.TempDir()
	const v, c = "v9.8.7-test", "0123456789abcdef"
	ldflags := "-X github.com/flockd/flock/internal/version.version=" + v + " -X github.com/flockd/flock/internal/version.commit=" + c
	build := exec.Command("go", "build", "-ldflags="+ldflags, "-o", out+"/", "./cmd/...")
	build.Dir = root
	if b, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, b)
	}
	for _, d := range dirs {
		name := filepath.Base(filepath.Dir(d))
		t.Run(name, func(t *testing.T) {
			cmd := exec.Command(filepath.Join(out, name), "-version")
			cmd.Env = append(os.Environ(), "KUBECONFIG=/nonexistent")
			b, err := cmd.CombinedOutput()
			want := name + " " + v + " commit=" + c + " go=" + runtime.Version() + " platform=" + runtime.GOOS + "/" + runtime.GOARCH + "\n"
			if err != nil || string(b) != want {
				t.Errorf("%s -version: %v, output %q; want status 0 and %q", name, err, b, want)
			}
			bad := exec.Command(filepath.Join(out, name), "-version=maybe")
			b, _ = bad.CombinedOutput()
			if code := bad.ProcessState.ExitCode(); code != 2 || !strings.Contains(string(b), "-version") {
				t.Errorf("%s -version=maybe: status %d, output %q; want 2 and a message naming -version", name, code, b)
			}
		})
	}
}
