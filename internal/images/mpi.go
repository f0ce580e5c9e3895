package images

import (
	"context"
	"fmt"
	"path"
	"slices"
	"strings"

	"github.com/flockd/flock/internal/imagebuild"
)

// MpiApp is ghcr.io/flockd/apps/mpi: Debian's Open MPI (mpirun, orted),
// Python 3 with mpi4py, and OpenSSH's client and server as mpirun's launch
// transport, set up to run without root (examples/batch/mpi): sshd listens
// on MpiSSHPort with a host key the container generates in /tmp, and
// accepts the key in MpiSSHDir (a Secret) for the image's user only. Its
// /etc/hosts is a symbolic link to MpiHostsLink (linkHosts).
const MpiApp = "apps/mpi"

// MpiHostsDir is where the pods of examples/batch/mpi mount the emptyDir
// peer-finder writes its hosts file and MPI hostfile into, MpiHostsLink the
// target of the image's /etc/hosts: peer-finder renames each new hosts file
// into the directory, and every lookup reads a whole one.
const (
	MpiHostsDir  = "/etc/flock/mpi"
	MpiHostsLink = MpiHostsDir + "/hosts"
)

// MpiSSHPort is the port the image's sshd listens on and its ssh client
// connects to: above 1024, so sshd runs as the image's user.
const MpiSSHPort = 2222

// MpiSSHDir is where the image's ssh client and server expect the job's
// key pair (a Secret's keys id_ed25519 and authorized_keys).
const MpiSSHDir = "/etc/mpi-ssh"

// MpiSSHConfig is the image's /etc/ssh/ssh_config: every host on
// MpiSSHPort with the job's key; pods are new at every run, so host keys
// are neither checked nor remembered (the key pair authenticates the
// client; the names are the hosts file's).
var MpiSSHConfig = fmt.Sprintf(`# ssh_config of ghcr.io/flockd/apps/mpi: mpirun's launch transport.
Host *
  Port %d
  IdentityFile %s/id_ed25519
  StrictHostKeyChecking no
  UserKnownHostsFile /dev/null
  BatchMode yes
  ConnectTimeout 5
  LogLevel ERROR
`, MpiSSHPort, MpiSSHDir)

// MpiSSHDConfig is the image's /etc/ssh/sshd_config for sshd run as the
// image's user (no privilege separation, no PAM: sshd can only log in the
// user it runs as): the host key in /tmp (generated at start, mode 0600),
// the authorized key from MpiSSHDir (root-owned Secret files, so strict
// modes are off).
var MpiSSHDConfig = fmt.Sprintf(`# sshd_config of ghcr.io/flockd/apps/mpi: run as the image's user.
Port %d
HostKey /tmp/ssh/ssh_host_ed25519_key
PidFile /tmp/ssh/sshd.pid
AuthorizedKeysFile %s/authorized_keys
StrictModes no
UsePAM no
PasswordAuthentication no
KbdInteractiveAuthentication no
PermitRootLogin no
PrintMotd no
LogLevel INFO
`, MpiSSHPort, MpiSSHDir)

// Debian packages of the MPI image. MpiPackages are per architecture:
// those whose files the image takes (the mpiPaths rules pick them), then
// the libraries their programs, plugins and Python modules link (taken as
// needed). MpiCommonPackages are architecture-independent (Open MPI's help
// texts, which mpirun prints its errors from).
var (
	MpiPackages = []string{
		"openmpi-bin", "libopenmpi3", "libpmix2", "python3-minimal", "python3.11-minimal",
		"libpython3.11-minimal", "libpython3.11-stdlib", "python3-mpi4py", "openssh-client", "openssh-server", "libc-bin",
		// The shell and the libraries.
		"busybox-static", "libc6", "libnl-3-200", "libnl-route-3-200", "libgcc-s1", "libstdc++6", "zlib1g", "libevent-core-2.1-7", "libevent-pthreads-2.1-7",
		"libhwloc15", "libudev1", "libmunge2", "libexpat1", "libssl3", "libffi8", "libbz2-1.0", "liblzma5",
		"libcrypt1", "libuuid1", "libmd0", "libbsd0", "libedit2", "libtinfo6", "libfido2-1", "libcbor0.8",
		"libgssapi-krb5-2", "libkrb5-3", "libk5crypto3", "libkrb5support0", "libcom-err2", "libkeyutils1",
		"libselinux1", "libpcre2-8-0", "libaudit1", "libcap-ng0", "libpam0g", "libwrap0", "libnsl2",
		"libtirpc3", "libsystemd0", "libcap2", "libgcrypt20", "libgpg-error0", "liblz4-1", "libzstd1",
	}
	MpiCommonPackages = []string{"openmpi-common"}
)

// mpiContent is how many of MpiPackages the image takes files from (the
// rest are libraries).
const mpiContent = 11

// pythonStdlib says which files of Debian's libpython3.11-minimal and
// libpython3.11-stdlib an image with Python keeps: the standard library
// without its tests, GUI, and modules for terminals and databases (whose
// libraries the images leave out).
func pythonStdlib(p string) bool {
	for _, s := range []string{"/test/", "/tests/", "/idlelib/", "/tkinter/", "/turtledemo/", "/ensurepip/",
		"/lib2to3/", "/pydoc_data/", "/config-3.11", "/lib-dynload/_test", "/lib-dynload/xx", "_ctypes_test",
		"_curses", "readline.", "_dbm.", "_sqlite3.", "nis.", "/sqlite3/", "/curses/", "/dbm/"} {
		if strings.Contains(p, s) {
			return false
		}
	}
	return strings.HasPrefix(p, "/usr/lib/python3.11/")
}

// mpiPaths says which files of a content package the image keeps: the
// programs mpirun runs and launches (no compiler wrappers: the image has
// no compiler), Open MPI's and PMIx's libraries and plugins but those for
// fabrics a pod has not (InfiniBand, Omni-Path, UCX, libfabric) and the
// Fortran, Java and OpenSHMEM ones, Python's standard library without its
// tests, GUI, and modules for terminals and databases, mpi4py without its
// C headers, ssh, ssh-keygen and sshd, and glibc's getent (names as the
// programs resolve them; busybox has none).
func mpiPaths(pkg, p string) bool {
	base := path.Base(p)
	switch pkg {
	case "python3.11-minimal":
		return p == "/usr/bin/python3.11"
	case "python3-minimal":
		return p == "/usr/bin/python3"
	case "openmpi-bin":
		return slices.Contains([]string{"/usr/bin/orterun", "/usr/bin/orted", "/usr/bin/ompi_info",
			"/usr/bin/mpirun.openmpi", "/usr/bin/mpiexec.openmpi", "/etc/openmpi/openmpi-mca-params.conf",
			"/etc/openmpi/openmpi-default-hostfile"}, p)
	case "openmpi-common":
		return strings.HasPrefix(p, "/usr/share/openmpi/help-")
	case "libopenmpi3", "libpmix2":
		for _, s := range []string{"ucx", "ofi", "openib", "psm", "verbs", "usnic", "java", "mpifh", "usempi",
			"oshmem", "_spml_", "_sshmem_", "_scoll_", "_memheap_", "_atomic_", "dbg_msgq", "monitoring", "ompitrace",
			"valgrind", "pmixcc", "slurm"} {
			if strings.Contains(base, s) {
				return false
			}
		}
		return strings.Contains(p, "/lib/") || strings.Contains(p, "/pmix2/share/")
	case "libpython3.11-minimal", "libpython3.11-stdlib":
		return pythonStdlib(p)
	case "python3-mpi4py":
		return strings.HasPrefix(p, "/usr/lib/python3/dist-packages/mpi4py/") &&
			!strings.Contains(p, "/include/") && !strings.HasSuffix(p, ".pxd") && !strings.HasSuffix(p, ".pyi")
	case "openssh-client":
		return p == "/usr/bin/ssh" || p == "/usr/bin/ssh-keygen"
	case "openssh-server":
		return p == "/usr/sbin/sshd"
	case "libc-bin":
		return p == "/usr/bin/getent"
	}
	return false
}

// MpiRoot returns the MPI image's root filesystem for goarch in two
// layers: the system (busybox, /etc with the ssh configurations and
// /etc/hosts a link to MpiHostsLink, the libraries) and the application (Open MPI, Python and mpi4py, OpenSSH,
// getent, picked by mpiPaths, with mpirun and mpiexec on the PATH as Debian's
// alternatives make them). pkgs must hold MpiPackages for goarch, common
// MpiCommonPackages; a library a program or plugin needs that none of
// them has is an error.
func MpiRoot(goarch string, pkgs, common map[string]Package) (system, app []imagebuild.File, err error) {
	triplet, ok := triplets[goarch]
	if !ok {
		return nil, nil, fmt.Errorf("mpi image: unsupported GOARCH %q", goarch)
	}
	r, err := pickContent(pkgs, common, append(slices.Clone(MpiPackages[:mpiContent]), MpiCommonPackages...), MpiPackages[mpiContent:], mpiPaths)
	if err != nil {
		return nil, nil, fmt.Errorf("mpi image: %w", err)
	}
	files, from, inApp, elfs := r.files, r.from, r.inApp, r.elfs
	files["/etc/ssh/ssh_config"] = imagebuild.Regular("/etc/ssh/ssh_config", 0o644, []byte(MpiSSHConfig))
	files["/etc/ssh/sshd_config"] = imagebuild.Regular("/etc/ssh/sshd_config", 0o644, []byte(MpiSSHDConfig))
	linkHosts(files, MpiHostsLink)
	for _, l := range []string{"mpirun", "mpiexec"} {
		p := "/usr/bin/" + l
		files[p], inApp[p] = imagebuild.Symlink(p, "orterun"), true
	}
	libDirs := []string{"/lib/" + triplet, "/usr/lib/" + triplet, "/usr/lib/" + triplet + "/pmix2/lib"}
	if _, err := imagebuild.WithLibraries(files, from, libDirs, elfs...); err != nil {
		return nil, nil, fmt.Errorf("mpi image: %w", err)
	}
	system, app = r.layers()
	return system, app, nil
}

// buildMpi builds the MPI image for o.Arch.
func buildMpi(ctx context.Context, o AppOptions) (Archive, error) {
	pkgs, common, all, err := unpackApp(ctx, o, MpiPackages, MpiCommonPackages)
	if err != nil {
		return Archive{}, err
	}
	system, app, err := MpiRoot(o.Arch, pkgs, common)
	if err != nil {
		return Archive{}, err
	}
	return writeApp(o, MpiApp, imagebuild.Config{
		Entrypoint: []string{"/bin/sh"},
		User:       fmt.Sprintf("%d:%d", UID, GID),
	}, all, system, app)
}
