package images

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
)

// imageRef matches a reference to one of flock's images, with or without
// the registry, and its tag if any.
var imageRef = regexp.MustCompile(`(?:ghcr\.io/)?flockd/(peer-finder|flock-controller|pause)(:[^\s"'\x60)\]]*)?`)

// TestOneImageName: README.md, CHANGELOG.md, examples/, config/ and charts/ name
// flock's images one way only, ghcr.io/flockd/<image>:<version> with the
// version of VERSION (or untagged, where kustomize sets the tag), and
// kustomize's config/default gives the controller's versioned image.
func TestOneImageName(t *testing.T) {
	root := filepath.Dir(filepath.Dir(archiveDir(t)))
	b, err := os.ReadFile(filepath.Join(root, "VERSION"))
	if err != nil {
		t.Fatal(err)
	}
	version := strings.TrimSpace(string(b))
	if !regexp.MustCompile(`^v\d+\.\d+\.\d+$`).MatchString(version) {
		t.Fatalf("VERSION %q is not vMAJOR.MINOR.PATCH", version)
	}
	files := []string{filepath.Join(root, "README.md"), filepath.Join(root, "CHANGELOG.md")}
	for _, dir := range []string{"examples", "config", "charts"} {
		err := filepath.WalkDir(filepath.Join(root, dir), func(p string, d fs.DirEntry, err error) error {
			if err == nil && !d.IsDir() {
				files = append(files, p)
			}
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	seen := 0
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(root, f)
		for i, line := range strings.Split(string(data), "\n") {
			for _, m := range imageRef.FindAllStringSubmatch(line, -1) {
				seen++
				if !strings.HasPrefix(m[0], "ghcr.io/") || m[2] != "" && m[2] != ":"+version {
					t.Errorf("%s:%d: %q; want ghcr.io/flockd/%s:%s (or no tag where kustomize sets it)", rel, i+1, m[0], m[1], version)
				}
			}
		}
	}
	if seen < 10 {
		t.Errorf("found %d image references in %d files; the pattern or the walk is broken", seen, len(files))
	}

	// kustomize's own library, as kubectl kustomize runs it.
	m, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), filepath.Join(root, "config", "default"))
	if err != nil {
		t.Fatalf("kustomize config/default: %v", err)
	}
	out, err := m.AsYaml()
	if err != nil {
		t.Fatal(err)
	}
	images := regexp.MustCompile(`(?m)^\s*image: (\S+)$`).FindAllStringSubmatch(string(out), -1)
	if len(images) != 1 || images[0][1] != "ghcr.io/flockd/flock-controller:"+version {
		t.Errorf("kustomize config/default: images %q, want exactly ghcr.io/flockd/flock-controller:%s", images, version)
	}
}
