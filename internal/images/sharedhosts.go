package images

import (
	"context"
	"fmt"

	"github.com/flockd/flock/internal/imagebuild"
)

// SharedHostsApp is ghcr.io/flockd/apps/shared-hosts, the trainer of
// examples/batch/shared-hosts: bash, busybox and getent (peer-finder's
// system layer) with /etc/hosts a symbolic link to SharedHostsLink, so that
// the C library reads the hosts file of a directory volume mounted at
// SharedHostsDir and sees each file renamed into it, which a file bind
// mount at /etc/hosts (or a subPath mount) never does.
const SharedHostsApp = "apps/shared-hosts"

// SharedHostsDir is where the shared directory is mounted in the pods of
// examples/batch/shared-hosts, and SharedHostsLink the target of their
// /etc/hosts. The directory is deeper than /etc/hosts on purpose: the
// runtime mounts the kubelet's /etc/hosts first (fewer path elements),
// through the link onto SharedHostsLink in the image, and the directory
// volume then covers it.
const (
	SharedHostsDir  = "/etc/flock/shared"
	SharedHostsLink = SharedHostsDir + "/hosts"
)

// SharedHostsRoot returns the root filesystem of SharedHostsApp: toolsRoot
// with /etc/hosts replaced by the link. pkgs must hold PeerFinderPackages.
func SharedHostsRoot(goarch string, pkgs map[string]Package) ([]imagebuild.File, error) {
	files, err := toolsRoot(goarch, pkgs)
	if err != nil {
		return nil, fmt.Errorf("shared-hosts image: %w", err)
	}
	linkHosts(files, SharedHostsLink)
	var root []imagebuild.File
	for _, f := range files {
		root = append(root, f)
	}
	return sortFiles(root), nil
}

// linkHosts makes the image's /etc/hosts a symbolic link to target, a file
// in a directory volume the pods mount deeper than /etc/hosts (three or more
// path elements, as SharedHostsDir): the C library opens the link anew at
// every lookup, so it reads each whole file renamed into that directory
// (-hosts-write-mode=replace), and the kubelet's own /etc/hosts mount, made
// first through the link, lands on target in the image, under the volume.
func linkHosts(files map[string]imagebuild.File, target string) {
	files["/etc/hosts"] = imagebuild.Symlink("/etc/hosts", target)
}

func buildSharedHosts(ctx context.Context, o AppOptions) (Archive, error) {
	pkgs, err := unpack(ctx, o.DebCache, o.Arch, PeerFinderPackages)
	if err != nil {
		return Archive{}, err
	}
	root, err := SharedHostsRoot(o.Arch, pkgs)
	if err != nil {
		return Archive{}, err
	}
	return writeApp(o, SharedHostsApp, imagebuild.Config{
		Entrypoint: []string{"/bin/sh"},
		User:       fmt.Sprintf("%d:%d", UID, GID),
	}, pkgs, root)
}
