package images

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/flockd/flock/internal/testing/need"
)

// zkScript runs in the ZooKeeper image: a one-member ensemble with dynamic
// reconfiguration, asked by the four-letter words over busybox nc, by
// zkCli.sh and by zkServer.sh status, all from the PATH.
const zkScript = `set -eu
echo "bash ${BASH_VERSION}"
# As the kubelet does in a pod: this host by name (the JVM asks for it).
echo "127.0.0.1 $(hostname)" >> /etc/hosts
mkdir -p /tmp/zk/conf /tmp/zk/data
cat > /tmp/zk/conf/zoo.cfg <<EOF
tickTime=500
initLimit=10
syncLimit=5
dataDir=/tmp/zk/data
standaloneEnabled=false
reconfigEnabled=true
admin.enableServer=false
4lw.commands.whitelist=srvr,conf,ruok
server.1=127.0.0.1:2888:3888;2181
EOF
echo 1 > /tmp/zk/data/myid
export ZOOCFGDIR=/tmp/zk/conf
zkServer.sh start-foreground > /tmp/zk/log 2>&1 &
i=0
until echo srvr | nc 127.0.0.1 2181 2>/dev/null | grep -q '^Mode: leader'; do
	i=$((i + 1))
	if [ "$i" -gt 240 ]; then echo "no leader after 2 minutes"; cat /tmp/zk/log; exit 1; fi
	sleep 0.5
done
echo srvr | nc 127.0.0.1 2181 | grep '^Zookeeper version'
echo "4lw $(echo srvr | nc 127.0.0.1 2181 | grep '^Mode')"
zkCli.sh -server 127.0.0.1:2181 config 2>/dev/null | grep '^server\.' | sed 's/^/config /'
zkServer.sh status 2>&1 | sed 's/^/status /'
`

// TestZookeeperImageRuns starts ZooKeeper in the image `make images` built,
// unpacked, in a chroot with its own network, hostname and processes.
func TestZookeeperImageRuns(t *testing.T) {
	p := filepath.Join(archiveDir(t), ArchiveName(ZookeeperApp))
	if _, err := os.Stat(p); err != nil {
		t.Skipf("%s not built: run make images first", p)
	}
	if runtime.GOARCH != "amd64" {
		t.Skip("the application images run on amd64 only")
	}
	need.Root(t, "(chroot, namespaces)")
	for _, tool := range []string{"unshare", "chroot", "mount", "ip"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("needs %s", tool)
		}
	}
	imgs := readArchive(t, p, builtRefs(t, ZookeeperApp)...)
	img := imgs["linux/amd64"]
	if img == nil {
		t.Fatalf("%s: no linux/amd64 image", p)
	}
	root := t.TempDir()
	writeRoot(t, img, root)
	// pid 1 of the namespace is the shell: its exit ends ZooKeeper too.
	cmd := exec.Command("unshare", "--mount", "--propagation", "private", "--net", "--uts", "--pid", "--fork", "--", "sh", "-c",
		`hostname zk-test && ip link set lo up && mkdir -p "$1/proc" && mount -t proc proc "$1/proc" && mkdir -p "$1/dev" && mount --bind /dev "$1/dev" && chroot "$1" /bin/bash -c "$2"`,
		"sh", root, zkScript)
	cmd.Env = []string{"PATH=" + Path}
	out, err := runWithDeadline(cmd, 3*time.Minute)
	if err != nil {
		t.Fatalf("ZooKeeper in the image: %v\n%s", err, out)
	}
	for _, want := range []string{"bash 5.", "Zookeeper version: 3.8", "4lw Mode: leader",
		"config server.1=127.0.0.1:2888:3888:participant;0.0.0.0:2181", "status Mode: leader"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}
