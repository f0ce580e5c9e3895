package apps

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// exampleScripts is examples/apps/<app>'s scripts (its scripts.yaml) in a
// temporary directory, their run and data directories (RUN=, DATA= in the
// scripts) moved into it, with a directory of stubs first in PATH: narrow
// tests of a script's decisions, the commands it calls stubbed.
type exampleScripts struct {
	t                   *testing.T
	dir, run, bin, data string
}

func newExampleScripts(t *testing.T, app, run, data string) exampleScripts {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "examples", "apps", app, "scripts.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var cm struct{ Data map[string]string }
	if err := yaml.Unmarshal(b, &cm); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	g := exampleScripts{t: t, dir: dir, run: filepath.Join(dir, "run"), bin: filepath.Join(dir, "bin"), data: filepath.Join(dir, "data")}
	for _, d := range []string{g.run, g.bin, g.data} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for name, text := range cm.Data {
		text = strings.Replace(text, "RUN="+run, "RUN="+g.run, 1)
		text = strings.Replace(text, "DATA="+data, "DATA="+g.data, 1)
		g.write(filepath.Join(dir, name), strings.ReplaceAll(text, "/scripts/", dir+"/"))
	}
	return g
}

func (g exampleScripts) write(path, text string) {
	g.t.Helper()
	if err := os.WriteFile(path, []byte(text), 0o755); err != nil {
		g.t.Fatal(err)
	}
}

// stub puts a command name running the shell script body first in PATH.
func (g exampleScripts) stub(name, body string) {
	g.write(filepath.Join(g.bin, name), "#!/bin/sh\n"+body+"\n")
}

// command runs script with sh, the stubs first in PATH, and env.
func (g exampleScripts) command(script string, env ...string) *exec.Cmd {
	cmd := exec.Command("sh", filepath.Join(g.dir, script))
	cmd.Env = append([]string{"PATH=" + g.bin + ":" + os.Getenv("PATH")}, env...)
	return cmd
}
