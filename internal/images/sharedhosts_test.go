package images

import (
	"context"
	"io/fs"
	"testing"
)

// TestSharedHostsRoot: the trainer image of examples/batch/shared-hosts is
// peer-finder's system layer (getent and its C library) with /etc/hosts a
// symbolic link into the shared directory, and no peer-finder.
func TestSharedHostsRoot(t *testing.T) {
	cache := t.TempDir()
	fakeDebs(t, cache)
	pkgs, err := unpack(context.Background(), cache, "amd64", PeerFinderPackages)
	if err != nil {
		t.Fatal(err)
	}
	root, err := SharedHostsRoot("amd64", pkgs)
	if err != nil {
		t.Fatal(err)
	}
	byPath := map[string]bool{}
	for _, f := range root {
		byPath[f.Path] = true
		if f.Path == "/etc/hosts" && (f.Mode.Type() != fs.ModeSymlink || f.Link != SharedHostsLink) {
			t.Errorf("/etc/hosts: mode %v link %q, want a symbolic link to %s", f.Mode, f.Link, SharedHostsLink)
		}
	}
	for _, p := range []string{"/etc/hosts", "/usr/bin/getent", "/lib/x86_64-linux-gnu/libc.so.6", "/bin/sh", "/etc/passwd"} {
		if !byPath[p] {
			t.Errorf("no %s in the image", p)
		}
	}
	if byPath["/peer-finder"] {
		t.Error("the trainer image holds peer-finder")
	}
}
