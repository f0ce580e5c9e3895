package images

import (
	"context"
	"os"
	"strings"
	"testing"
)

// jreHome is the JRE's directory in the fake openjdk package (Debian's).
const jreHome = "/usr/lib/jvm/java-17-openjdk-amd64"

// fakeZookeeperDebs adds to cache (as fakeDebs prepared it) stand-ins of
// the ZooKeeper image's packages: a JRE whose java is the host's getent
// (dynamically linked to the C library), with files the image drops, and
// the jars and scripts by their Debian paths.
func fakeZookeeperDebs(t *testing.T, cache string) {
	t.Helper()
	getent, err := os.ReadFile("/usr/bin/getent")
	if err != nil {
		t.Skipf("needs the host's getent: %v", err)
	}
	jre := map[string]string{
		jreHome + "/bin/java":                      string(getent),
		jreHome + "/bin/keytool":                   string(getent),
		jreHome + "/lib/modules":                   "modules",
		jreHome + "/lib/libawt.so":                 "awt, links libraries the image lacks",
		jreHome + "/lib/ct.sym":                    "javac's symbols",
		jreHome + "/legal/java.base/LICENSE":       "license",
		jreHome + "/lib/jvm.cfg":                   "->/etc/java-17-openjdk/jvm-amd64.cfg",
		"/etc/java-17-openjdk/jvm-amd64.cfg":       "-server KNOWN",
		"/usr/share/doc/openjdk-17-jre-headless/x": "doc",
	}
	jars := func(names ...string) map[string]string {
		m := map[string]string{}
		for _, n := range names {
			m["/usr/share/java/"+n] = "jar " + n
		}
		return m
	}
	zk := map[string]string{
		"/usr/share/zookeeper/bin/zkServer.sh":  "#!/usr/bin/env bash\n",
		"/usr/share/zookeeper/bin/zkCli.sh":     "#!/usr/bin/env bash\n",
		"/usr/share/zookeeper/bin/zkCleanup.sh": "#!/usr/bin/env bash\n",
		"/usr/share/zookeeper/bin/zkEnv.sh":     "->/etc/zookeeper/conf/environment",
		"/etc/zookeeper/conf_example/zoo.cfg":   "tickTime=2000\n",
	}
	for _, p := range []struct {
		name, arch string
		files      map[string]string
	}{
		{"zlib1g", "amd64", map[string]string{"/lib/x86_64-linux-gnu/libz.so.1": "z"}},
		{"libgcc-s1", "amd64", map[string]string{"/lib/x86_64-linux-gnu/libgcc_s.so.1": "gcc"}},
		{"libstdc++6", "amd64", map[string]string{"/usr/lib/x86_64-linux-gnu/libstdc++.so.6": "c++"}},
		{"openjdk-17-jre-headless", "amd64", jre},
		{"zookeeper", "all", zk},
		{"libzookeeper-java", "all", jars("zookeeper.jar", "zookeeper-jute.jar", "zookeeper-it.jar")},
		{"libslf4j-java", "all", jars("slf4j-api.jar", "slf4j-simple.jar", "slf4j-nop.jar")},
		{"libcommons-cli-java", "all", jars("commons-cli.jar")},
		{"libdropwizard-metrics-java", "all", jars("metrics-core.jar", "metrics-jvm.jar")},
		{"libsnappy-java", "all", jars("snappy-java.jar")},
	} {
		fakeDeb(t, cache, p.name, "1.0-1", p.arch, p.files)
	}
}

// TestZookeeperRoot checks the ZooKeeper image's files: the JRE without
// what a headless server does not load, with the C library its java links
// and /usr/bin/java; the jars ZooKeeper loads and no others; the scripts on
// the PATH beside a zkEnv.sh; and a missing jar is an error.
func TestZookeeperRoot(t *testing.T) {
	cache := t.TempDir()
	fakeDebs(t, cache)
	fakeZookeeperDebs(t, cache)
	ctx := context.Background()
	pkgs, err := unpack(ctx, cache, "amd64", ZookeeperPackages)
	if err != nil {
		t.Fatal(err)
	}
	java, err := unpack(ctx, cache, "all", ZookeeperJavaPackages)
	if err != nil {
		t.Fatal(err)
	}
	system, app, err := ZookeeperRoot("amd64", pkgs, java)
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]string{}
	inSystem := map[string]bool{}
	for _, f := range system {
		files[f.Path], inSystem[f.Path] = f.Link, true
	}
	for _, f := range app {
		if _, dup := files[f.Path]; dup {
			t.Errorf("%s in both layers", f.Path)
		}
		files[f.Path] = f.Link
	}
	for _, p := range []string{
		jreHome + "/bin/java", jreHome + "/lib/modules", "/etc/java-17-openjdk/jvm-amd64.cfg",
		"/lib64/ld-linux-x86-64.so.2", "/lib/x86_64-linux-gnu/libc.so.6", "/bin/busybox", "/etc/passwd",
	} {
		if _, ok := files[p]; !ok || !inSystem[p] {
			t.Errorf("system layer has no %s", p)
		}
	}
	links := map[string]string{
		"/bin/sh": "busybox", "/bin/nc": "busybox", "/usr/bin/env": "/bin/busybox", "/usr/bin/bash": "/bin/bash",
		"/usr/bin/java": jreHome + "/bin/java", jreHome + "/lib/jvm.cfg": "/etc/java-17-openjdk/jvm-amd64.cfg",
		"/usr/bin/zkServer.sh": "/usr/share/zookeeper/bin/zkServer.sh", "/usr/bin/zkCli.sh": "/usr/share/zookeeper/bin/zkCli.sh",
		"/usr/bin/zkEnv.sh": "/etc/zookeeper/conf/environment", "/usr/share/zookeeper/bin/zkEnv.sh": "/etc/zookeeper/conf/environment",
	}
	for p, want := range links {
		if got, ok := files[p]; !ok || got != want {
			t.Errorf("%s -> %q (present %v), want -> %q", p, got, ok, want)
		}
	}
	for _, j := range zookeeperJars {
		if _, ok := files["/usr/share/java/"+j]; !ok {
			t.Errorf("no jar %s", j)
		}
	}
	for _, p := range []string{
		jreHome + "/bin/keytool", jreHome + "/lib/libawt.so", jreHome + "/lib/ct.sym", jreHome + "/legal/java.base/LICENSE",
		"/usr/share/doc/openjdk-17-jre-headless/x", "/usr/share/java/zookeeper-it.jar", "/usr/share/java/slf4j-nop.jar",
		"/usr/share/java/metrics-jvm.jar", "/etc/zookeeper/conf_example/zoo.cfg",
	} {
		if _, ok := files[p]; ok {
			t.Errorf("image has %s", p)
		}
	}
	var env string
	for _, f := range app {
		if f.Path == "/etc/zookeeper/conf/environment" {
			env = string(f.Data)
		}
	}
	for _, want := range []string{"ZOOCFGDIR=${ZOOCFGDIR:-", "-Xmx128m", "slf4j-simple.jar", "JMXDISABLE"} {
		if !strings.Contains(env, want) {
			t.Errorf("zkEnv.sh lacks %q:\n%s", want, env)
		}
	}

	delete(java["libslf4j-java"].Files, "/usr/share/java/slf4j-simple.jar")
	if _, _, err := ZookeeperRoot("amd64", pkgs, java); err == nil || !strings.Contains(err.Error(), "jars") {
		t.Errorf("without slf4j-simple.jar: err %v, want one naming the jars", err)
	}
}
