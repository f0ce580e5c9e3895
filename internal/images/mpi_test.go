package images

import (
	"context"
	"os"
	"strings"
	"testing"
)

// fakeMpiDebs adds to cache (as fakeDebs prepared it) stand-ins of the MPI
// image's packages: the programs and plugins are the host's getent
// (dynamically linked to the C library), beside files the image leaves out;
// the library packages hold only a copyright file.
func fakeMpiDebs(t *testing.T, cache string) {
	t.Helper()
	b, err := os.ReadFile("/usr/bin/getent")
	if err != nil {
		t.Skipf("needs the host's getent: %v", err)
	}
	getent := string(b)
	const lib, py = "usr/lib/x86_64-linux-gnu/", "usr/lib/python3.11/"
	content := map[string]map[string]string{
		"openmpi-bin": {"usr/bin/orterun": getent, "usr/bin/orted": getent, "usr/bin/opal_wrapper": getent,
			"usr/bin/mpicc.openmpi": "->opal_wrapper", "usr/bin/mpirun.openmpi": "->orterun",
			"etc/openmpi/openmpi-mca-params.conf": "# params\n"},
		"libopenmpi3": {lib + "libmpi.so.40.30.4": getent, lib + "libmpi.so.40": "->libmpi.so.40.30.4",
			lib + "libmpi_mpifh.so.40.30.0": "fortran", lib + "openmpi/lib/openmpi3/mca_btl_tcp.so": getent,
			lib + "openmpi/lib/openmpi3/mca_pml_ucx.so": "needs UCX"},
		"libpmix2":              {lib + "pmix2/lib/libpmix.so.2.6.2": getent, lib + "libpmix.so.2": "->pmix2/lib/libpmix.so.2.6.2"},
		"python3-minimal":       {"usr/bin/python3": "->python3.11", "usr/bin/py3compile": "not taken"},
		"python3.11-minimal":    {"usr/bin/python3.11": getent},
		"libpython3.11-minimal": {py + "os.py": "# os\n", py + "config-3.11-x86_64-linux-gnu/Makefile": "not taken"},
		"libpython3.11-stdlib": {py + "lib-dynload/_ctypes.cpython-311-x86_64-linux-gnu.so": getent,
			py + "lib-dynload/_sqlite3.cpython-311-x86_64-linux-gnu.so": "needs sqlite", py + "test/test_os.py": "not taken"},
		"python3-mpi4py": {"usr/lib/python3/dist-packages/mpi4py/MPI.cpython-311-x86_64-linux-gnu.so": getent,
			"usr/lib/python3/dist-packages/mpi4py/__init__.py": "", "usr/lib/python3/dist-packages/mpi4py/include/mpi4py/mpi4py.h": "not taken"},
		"openssh-client": {"usr/bin/ssh": getent, "usr/bin/ssh-keygen": getent, "usr/bin/scp": getent},
		"openssh-server": {"usr/sbin/sshd": getent, "etc/init.d/ssh": "not taken"},
	}
	for _, p := range MpiPackages {
		switch files, ok := content[p]; {
		case ok:
			fakeDeb(t, cache, p, "1.0", "amd64", files)
		case p != "busybox-static" && p != "libc6" && p != "libc-bin":
			fakeDeb(t, cache, p, "1.0", "amd64", map[string]string{"usr/share/doc/" + p + "/copyright": p})
		}
	}
	fakeDeb(t, cache, "openmpi-common", "1.0", "all", map[string]string{
		"usr/share/openmpi/help-mpirun.txt": "help", "usr/share/openmpi/mpicc-wrapper-data.txt": "not taken"})
}

// TestMpiRoot checks the MPI image's files: the programs mpirun runs and
// launches with the C library they link, mpirun and mpiexec as Debian's
// alternatives make them, Open MPI's plugins but those for fabrics a pod
// has not, Python without its tests and the modules whose libraries the
// image leaves out, mpi4py without headers, ssh and sshd configured for a
// non-root sshd, /etc/hosts a link into the hosts directory; a missing package is an error.
func TestMpiRoot(t *testing.T) {
	cache := t.TempDir()
	fakeDebs(t, cache)
	fakeMpiDebs(t, cache)
	ctx := context.Background()
	pkgs, err := unpack(ctx, cache, "amd64", MpiPackages)
	if err != nil {
		t.Fatal(err)
	}
	common, err := unpack(ctx, cache, "all", MpiCommonPackages)
	if err != nil {
		t.Fatal(err)
	}
	system, app, err := MpiRoot("amd64", pkgs, common)
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]string{}
	for _, f := range append(system, app...) {
		files[f.Path] = f.Link + string(f.Data)
	}
	inApp := map[string]bool{}
	for _, f := range app {
		inApp[f.Path] = true
	}
	const lib = "/usr/lib/x86_64-linux-gnu/"
	for _, p := range []string{"/usr/bin/orterun", "/usr/bin/orted", "/usr/bin/mpirun", "/usr/bin/mpiexec", "/usr/bin/python3",
		"/usr/bin/python3.11", lib + "libmpi.so.40", lib + "openmpi/lib/openmpi3/mca_btl_tcp.so", lib + "libpmix.so.2",
		"/usr/lib/python3.11/os.py", "/usr/lib/python3.11/lib-dynload/_ctypes.cpython-311-x86_64-linux-gnu.so",
		"/usr/lib/python3/dist-packages/mpi4py/MPI.cpython-311-x86_64-linux-gnu.so", "/usr/share/openmpi/help-mpirun.txt",
		"/usr/bin/ssh", "/usr/bin/ssh-keygen", "/usr/sbin/sshd", "/usr/bin/getent", "/etc/openmpi/openmpi-mca-params.conf"} {
		if _, ok := files[p]; !ok || !inApp[p] {
			t.Errorf("no %s in the application layer", p)
		}
	}
	for _, p := range []string{"/bin/busybox", "/bin/sh", "/lib/x86_64-linux-gnu/libc.so.6", "/lib64/ld-linux-x86-64.so.2", "/etc/passwd"} {
		if _, ok := files[p]; !ok || inApp[p] {
			t.Errorf("no %s in the system layer", p)
		}
	}
	if files["/etc/hosts"] != MpiHostsLink || inApp["/etc/hosts"] {
		t.Errorf("/etc/hosts is %q, want a link to %s in the system layer", files["/etc/hosts"], MpiHostsLink)
	}
	if files["/usr/bin/mpirun"] != "orterun" {
		t.Errorf("/usr/bin/mpirun is %q, want a link to orterun", files["/usr/bin/mpirun"])
	}
	for _, p := range []string{"/usr/bin/opal_wrapper", "/usr/bin/mpicc.openmpi", lib + "libmpi_mpifh.so.40.30.0",
		lib + "openmpi/lib/openmpi3/mca_pml_ucx.so", "/usr/bin/py3compile", "/usr/lib/python3.11/config-3.11-x86_64-linux-gnu/Makefile",
		"/usr/lib/python3.11/lib-dynload/_sqlite3.cpython-311-x86_64-linux-gnu.so", "/usr/lib/python3.11/test/test_os.py",
		"/usr/lib/python3/dist-packages/mpi4py/include/mpi4py/mpi4py.h", "/usr/bin/scp", "/etc/init.d/ssh",
		"/usr/share/openmpi/mpicc-wrapper-data.txt", "/usr/bin/ldd", "/usr/share/doc/libpam0g/copyright"} {
		if _, ok := files[p]; ok {
			t.Errorf("%s is in the image, want it left out", p)
		}
	}
	for p, want := range map[string]string{
		"/etc/ssh/sshd_config": "Port 2222\n", "/etc/ssh/ssh_config": "IdentityFile /etc/mpi-ssh/id_ed25519\n",
	} {
		if !strings.Contains(files[p], want) {
			t.Errorf("%s lacks %q:\n%s", p, want, files[p])
		}
	}
	for _, want := range []string{"UsePAM no", "HostKey /tmp/", "AuthorizedKeysFile /etc/mpi-ssh/authorized_keys"} {
		if !strings.Contains(files["/etc/ssh/sshd_config"], want) {
			t.Errorf("sshd_config lacks %q", want)
		}
	}
	delete(pkgs, "libpam0g")
	if _, _, err := MpiRoot("amd64", pkgs, common); err == nil || !strings.Contains(err.Error(), "libpam0g") {
		t.Errorf("MpiRoot without libpam0g: %v, want an error naming it", err)
	}
}
