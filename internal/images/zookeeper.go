package images

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/flockd/flock/internal/imagebuild"
)

// ZookeeperApp is ghcr.io/flockd/apps/zookeeper: Debian's ZooKeeper (3.8,
// with dynamic reconfiguration) on Debian's headless OpenJDK, with
// zkServer.sh, zkCli.sh and zkEnv.sh on the PATH, bash for them and
// busybox (nc for the four-letter words).
const ZookeeperApp = "apps/zookeeper"

// Debian packages of the ZooKeeper image. ZookeeperPackages are per
// architecture: the shells, the JRE and the C and C++ libraries it links.
// ZookeeperJavaPackages are architecture-independent: ZooKeeper and the
// jars its server and CLI load (zookeeper.jar's manifest names the rest,
// for the admin server, Netty and jline, which this image leaves out).
var (
	ZookeeperPackages     = []string{"busybox-static", "bash-static", "libc6", "zlib1g", "libgcc-s1", "libstdc++6", "openjdk-17-jre-headless"}
	ZookeeperJavaPackages = []string{"zookeeper", "libzookeeper-java", "libslf4j-java", "libcommons-cli-java", "libdropwizard-metrics-java", "libsnappy-java"}
)

// zookeeperJars are the jars of ZookeeperJavaPackages the image keeps.
var zookeeperJars = []string{
	"zookeeper.jar", "zookeeper-jute.jar", "slf4j-api.jar", "slf4j-simple.jar",
	"commons-cli.jar", "metrics-core.jar", "snappy-java.jar",
}

// jreDropped are JRE files a headless server needs not: desktop and sound
// libraries (and the libraries they link: fonts, images, ALSA, PC/SC), the
// serviceability agent, javac's symbol file, the class-data archive for
// heaps over 32 GiB, tools other than java, documentation.
var jreDropped = []string{
	"lib/libawt.so", "lib/libawt_headless.so", "lib/libfontmanager.so", "lib/libjavajpeg.so",
	"lib/liblcms.so", "lib/libjsound.so", "lib/libmlib_image.so", "lib/libj2pcsc.so",
	"lib/libsaproc.so", "lib/ct.sym", "lib/server/classes_nocoops.jsa",
}

// ZookeeperEnvironment is zkEnv.sh (Debian's /etc/zookeeper/conf/environment,
// sourced by zkServer.sh and zkCli.sh), with defaults a container may
// override: ZOOCFGDIR (where zoo.cfg is; the example scripts write it to
// the data volume), SERVER_JVMFLAGS (a 128 MiB heap) and CLIENT_JVMFLAGS.
// Logs go to stderr (slf4j-simple); JMX is off.
const ZookeeperEnvironment = `# zkEnv.sh of ghcr.io/flockd/apps/zookeeper: every value may be set in the environment.
ZOOCFGDIR=${ZOOCFGDIR:-/etc/zookeeper/conf}
ZOOCFG=${ZOOCFG:-$ZOOCFGDIR/zoo.cfg}
ZOO_LOG_DIR=${ZOO_LOG_DIR:-/tmp}
JMXDISABLE=${JMXDISABLE:-true}
JAVA=/usr/bin/java
SERVER_JVMFLAGS=${SERVER_JVMFLAGS:--Xmx128m -XX:+UseSerialGC}
CLIENT_JVMFLAGS=${CLIENT_JVMFLAGS:--Xmx64m -XX:+UseSerialGC -XX:TieredStopAtLevel=1 -Dorg.slf4j.simpleLogger.defaultLogLevel=warn}
CLASSPATH="$ZOOCFGDIR:/usr/share/java/zookeeper.jar:/usr/share/java/slf4j-simple.jar"
`

// ZookeeperRoot returns the ZooKeeper image's root filesystem for goarch in
// two layers: the system (busybox, bash, /etc, the JRE and the libraries it
// links) and the application (ZooKeeper's jars and scripts, zkEnv.sh, and
// links on the PATH). pkgs must hold ZookeeperPackages for goarch, java
// ZookeeperJavaPackages.
func ZookeeperRoot(goarch string, pkgs, java map[string]Package) (system, app []imagebuild.File, err error) {
	triplet, ok := triplets[goarch]
	if !ok {
		return nil, nil, fmt.Errorf("zookeeper image: unsupported GOARCH %q", goarch)
	}
	get := func(from map[string]Package, name string) (Package, error) {
		p, ok := from[name]
		if !ok {
			return Package{}, fmt.Errorf("zookeeper image: package %s missing", name)
		}
		return p, nil
	}
	files, err := shell(pkgs)
	if err != nil {
		return nil, nil, fmt.Errorf("zookeeper image: %w", err)
	}
	if err := addBash(files, pkgs); err != nil {
		return nil, nil, fmt.Errorf("zookeeper image: %w", err)
	}

	// The JRE: its directory under /usr/lib/jvm and its configuration in
	// /etc (the JRE's links point there).
	jre, err := get(pkgs, "openjdk-17-jre-headless")
	if err != nil {
		return nil, nil, err
	}
	home := ""
	for p, f := range jre.Files {
		if strings.HasPrefix(p, "/usr/lib/jvm/") && strings.HasSuffix(p, "/bin/java") && f.Mode.IsRegular() {
			home = strings.TrimSuffix(p, "/bin/java")
		}
	}
	if home == "" {
		return nil, nil, errors.New("zookeeper image: openjdk-17-jre-headless has no /usr/lib/jvm/*/bin/java")
	}
	var elfs []string
	for p, f := range jre.Files {
		rel, inHome := strings.CutPrefix(p, home+"/")
		switch {
		case f.Mode.IsDir():
			continue
		case inHome:
			if slices.Contains(jreDropped, rel) || strings.HasPrefix(rel, "legal/") || strings.HasPrefix(rel, "man/") ||
				strings.HasPrefix(rel, "bin/") && rel != "bin/java" {
				continue
			}
		case strings.HasPrefix(p, "/etc/java-"):
		default:
			continue
		}
		f.UID, f.GID = 0, 0
		files[p] = f
		if f.Mode.IsRegular() && (rel == "bin/java" || strings.HasSuffix(p, ".so")) {
			elfs = append(elfs, p)
		}
	}
	files["/usr/bin/java"] = imagebuild.Symlink("/usr/bin/java", home+"/bin/java")

	// The libraries the JRE links, from the C and C++ runtime packages and
	// the JRE itself ($ORIGIN/../lib, lib/server).
	from := map[string]imagebuild.File{}
	for _, n := range []string{"libc6", "zlib1g", "libgcc-s1", "libstdc++6"} {
		p, err := get(pkgs, n)
		if err != nil {
			return nil, nil, err
		}
		for k, f := range p.Files {
			from[k] = f
		}
	}
	for _, p := range elfs {
		from[p] = files[p]
	}
	slices.Sort(elfs)
	libDirs := []string{"/lib/" + triplet, "/usr/lib/" + triplet, home + "/lib", home + "/lib/server"}
	if _, err := imagebuild.WithLibraries(files, from, libDirs, elfs...); err != nil {
		return nil, nil, fmt.Errorf("zookeeper image: %w", err)
	}
	for _, f := range files {
		system = append(system, f)
	}

	// ZooKeeper: the jars it loads, its scripts, zkEnv.sh.
	for _, name := range ZookeeperJavaPackages {
		p, err := get(java, name)
		if err != nil {
			return nil, nil, err
		}
		for _, jar := range zookeeperJars {
			if f, ok := p.Files["/usr/share/java/"+jar]; ok {
				f.UID, f.GID = 0, 0
				app = append(app, f)
			}
		}
	}
	if len(app) != len(zookeeperJars) {
		return nil, nil, fmt.Errorf("zookeeper image: found %d of the jars %v", len(app), zookeeperJars)
	}
	zk, err := get(java, "zookeeper")
	if err != nil {
		return nil, nil, err
	}
	for _, s := range []string{"zkServer.sh", "zkCli.sh", "zkCleanup.sh"} {
		f, ok := zk.Files["/usr/share/zookeeper/bin/"+s]
		if !ok || !f.Mode.IsRegular() {
			return nil, nil, fmt.Errorf("zookeeper image: package zookeeper has no /usr/share/zookeeper/bin/%s", s)
		}
		f.Mode, f.UID, f.GID = 0o755, 0, 0
		app = append(app, f, imagebuild.Symlink("/usr/bin/"+s, f.Path))
	}
	// The scripts source zkEnv.sh beside their own path, as called: the
	// links in /usr/bin need one too.
	app = append(app,
		imagebuild.Regular("/etc/zookeeper/conf/environment", 0o644, []byte(ZookeeperEnvironment)),
		imagebuild.Symlink("/usr/share/zookeeper/bin/zkEnv.sh", "/etc/zookeeper/conf/environment"),
		imagebuild.Symlink("/usr/bin/zkEnv.sh", "/etc/zookeeper/conf/environment"),
		imagebuild.Dir("/var/lib/zookeeper", 0o755),
	)
	return sortFiles(system), sortFiles(app), nil
}

// buildZookeeper builds the ZooKeeper image for o.Arch.
func buildZookeeper(ctx context.Context, o AppOptions) (Archive, error) {
	pkgs, java, all, err := unpackApp(ctx, o, ZookeeperPackages, ZookeeperJavaPackages)
	if err != nil {
		return Archive{}, err
	}
	system, app, err := ZookeeperRoot(o.Arch, pkgs, java)
	if err != nil {
		return Archive{}, err
	}
	return writeApp(o, ZookeeperApp, imagebuild.Config{
		Entrypoint: []string{"/usr/bin/zkServer.sh", "start-foreground"},
	}, all, system, app)
}
