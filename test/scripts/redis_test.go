// Package scripts tests the examples' shell scripts on this machine, with
// a fake client in place of the application: narrow tests of a script's
// decisions in states a real cluster reaches only by a race. The examples
// themselves are tested on the real nodes (test/realnode).
package scripts

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

// fakeRedisCli answers "redis-cli -e -h HOST info replication" from
// $STATE/HOST.info (or, once each, $STATE/HOST.info.first: the answer before
// a change), logs every call to $STATE/calls and answers OK to the rest.
const fakeRedisCli = `#!/bin/sh
echo "$*" >> "$STATE/calls"
[ "$1" = -e ] && shift
[ "$1" = -h ] && { host=$2; shift 2; }
if [ "$1" = info ]; then
  if [ -f "$STATE/$host.info.first" ]; then cat "$STATE/$host.info.first"; rm "$STATE/$host.info.first"; exit 0; fi
  [ -f "$STATE/$host.info" ] || { echo "Could not connect to Redis at $host:6379" >&2; exit 1; }
  cat "$STATE/$host.info"
  exit 0
fi
echo OK
`

// redisScripts writes examples/apps/redis's scripts into dir, their paths
// (/scripts, /run/redis) moved under it, and returns dir's run directory.
func redisScripts(t *testing.T, dir string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "examples", "apps", "redis", "scripts.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var cm corev1.ConfigMap
	if err := yaml.Unmarshal(b, &cm); err != nil {
		t.Fatal(err)
	}
	run := filepath.Join(dir, "run")
	if err := os.MkdirAll(run, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, text := range cm.Data {
		text = strings.ReplaceAll(text, "/scripts/", dir+"/")
		text = strings.ReplaceAll(text, "/run/redis", run)
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return run
}

// TestRedisOnChangeNeverFollowsItself: the sidecar's hook reads this
// member as a replica of redis-0, which follows redis-1, this member:
// another member promoted it between the hook's two reads (redis-10's
// round 28: redis-0's replacement promoted redis-1, whose hook then made
// it a replica of itself, and the set had no primary). The hook must
// leave a member that is the primary alone.
func TestRedisOnChangeNeverFollowsItself(t *testing.T) {
	dir := t.TempDir()
	run := redisScripts(t, dir)
	state := filepath.Join(dir, "state")
	bin := filepath.Join(dir, "bin")
	for _, d := range []string{state, bin} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	const ns = ".redis.ns.svc.cluster.local"
	files := map[string]string{
		filepath.Join(bin, "redis-cli"):              fakeRedisCli,
		filepath.Join(run, "self"):                   "redis-1" + ns + "\n",
		filepath.Join(state, "127.0.0.1.info.first"): "role:slave\nmaster_host:redis-0" + ns + "\nmaster_link_status:down\n",
		filepath.Join(state, "127.0.0.1.info"):       "role:master\nconnected_slaves:2\n",
		filepath.Join(state, "redis-0"+ns+".info"):   "role:slave\nmaster_host:redis-1" + ns + "\nmaster_link_status:up\n",
		filepath.Join(state, "redis-1"+ns+".info"):   "role:master\nconnected_slaves:2\n",
		filepath.Join(state, "redis-2"+ns+".info"):   "role:slave\nmaster_host:redis-1" + ns + "\nmaster_link_status:up\n",
	}
	for path, text := range files {
		if err := os.WriteFile(path, []byte(text), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command("/bin/sh", filepath.Join(dir, "on-change.sh"))
	cmd.Env = append(os.Environ(), "PATH="+bin+":"+os.Getenv("PATH"), "STATE="+state)
	cmd.Stdin = strings.NewReader("redis-0" + ns + " 10.0.0.1\nredis-1" + ns + " 10.0.0.2\nredis-2" + ns + " 10.0.0.3\n")
	out, err := cmd.CombinedOutput()
	calls, _ := os.ReadFile(filepath.Join(state, "calls"))
	if err != nil {
		t.Fatalf("on-change.sh: %v\n%s\ncalls:\n%s", err, out, calls)
	}
	for line := range strings.Lines(string(calls)) {
		if strings.Contains(line, "-h 127.0.0.1 replicaof") {
			t.Errorf("the hook changed this member, the primary: %q\noutput:\n%s\ncalls:\n%s", line, out, calls)
		}
	}
}
