package imagebuild

import (
	"archive/tar"
	"bytes"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

var epoch = time.Unix(1700000000, 0).UTC()

// entries reads a tar stream into name -> header (+ content), in order.
func entries(t *testing.T, r io.Reader) ([]string, map[string]*tar.Header, map[string]string) {
	t.Helper()
	var names []string
	hdrs := map[string]*tar.Header{}
	data := map[string]string{}
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return names, hdrs, data
		}
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, h.Name)
		hdrs[h.Name], data[h.Name] = h, string(b)
	}
}

func TestLayerSortedWithParentsAndModes(t *testing.T) {
	files := []File{
		Symlink("/bin/sh", "busybox"),
		Regular("/bin/busybox", 0o755, []byte("bb")),
		{Path: "/tmp", Mode: fs.ModeDir | fs.ModeSticky | 0o777},
		{Path: "/home/flock", Mode: fs.ModeDir | 0o755, UID: 65532, GID: 65532},
		Regular("/etc/ssl/certs/ca.crt", 0o644, []byte("pem")),
	}
	l, err := Layer(files, epoch)
	if err != nil {
		t.Fatal(err)
	}
	if mt, _ := l.MediaType(); mt != types.OCILayer {
		t.Errorf("media type %s, want %s", mt, types.OCILayer)
	}
	rc, err := l.Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = rc.Close() }()
	names, hdrs, data := entries(t, rc)
	want := []string{"bin/", "bin/busybox", "bin/sh", "etc/", "etc/ssl/", "etc/ssl/certs/", "etc/ssl/certs/ca.crt", "home/", "home/flock/", "tmp/"}
	if !reflect.DeepEqual(names, want) {
		t.Fatalf("entries\n got %v\nwant %v", names, want)
	}
	for _, n := range names {
		if !hdrs[n].ModTime.Equal(epoch) {
			t.Errorf("%s: mtime %v, want %v", n, hdrs[n].ModTime, epoch)
		}
	}
	if h := hdrs["tmp/"]; h.Mode != 0o1777 || h.Typeflag != tar.TypeDir {
		t.Errorf("tmp/: mode %o type %c, want 1777 dir", h.Mode, h.Typeflag)
	}
	if h := hdrs["bin/sh"]; h.Typeflag != tar.TypeSymlink || h.Linkname != "busybox" {
		t.Errorf("bin/sh: type %c -> %q, want symlink -> busybox", h.Typeflag, h.Linkname)
	}
	if h := hdrs["home/flock/"]; h.Uid != 65532 || h.Gid != 65532 {
		t.Errorf("home/flock/: owner %d:%d, want 65532:65532", h.Uid, h.Gid)
	}
	if h := hdrs["etc/ssl/"]; h.Mode != 0o755 || h.Uid != 0 {
		t.Errorf("added parent etc/ssl/: mode %o uid %d, want 755 root", h.Mode, h.Uid)
	}
	if data["bin/busybox"] != "bb" || hdrs["bin/busybox"].Mode != 0o755 {
		t.Errorf("bin/busybox: %q mode %o", data["bin/busybox"], hdrs["bin/busybox"].Mode)
	}

	// Same files in another order: same digest.
	rev := append([]File(nil), files...)
	for i, j := 0, len(rev)-1; i < j; i, j = i+1, j-1 {
		rev[i], rev[j] = rev[j], rev[i]
	}
	l2, err := Layer(rev, epoch)
	if err != nil {
		t.Fatal(err)
	}
	d1, _ := l.Digest()
	d2, _ := l2.Digest()
	if d1 != d2 {
		t.Errorf("digest depends on input order: %v vs %v", d1, d2)
	}
	l3, err := Layer(files, epoch.Add(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if d3, _ := l3.Digest(); d3 == d1 {
		t.Errorf("digest ignores mtime")
	}
}

func TestLayerRejectsBadEntries(t *testing.T) {
	for name, files := range map[string][]File{
		"relative":      {Regular("bin/x", 0o755, nil)},
		"unclean":       {Regular("/bin//x", 0o755, nil)},
		"root":          {Dir("/", 0o755)},
		"duplicate":     {Regular("/x", 0o644, nil), Regular("/x", 0o644, nil)},
		"file parent":   {Regular("/x", 0o644, nil), Regular("/x/y", 0o644, nil)},
		"empty symlink": {{Path: "/l", Mode: fs.ModeSymlink | 0o777}},
		"device":        {{Path: "/dev/null", Mode: fs.ModeDevice | 0o666}},
	} {
		if _, err := Layer(files, epoch); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

// readArchive opens an OCI archive's layout.
func readArchive(t *testing.T, path string) (layout.Path, v1.IndexManifest) {
	t.Helper()
	lp, im, err := OpenArchive(path, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return lp, im
}

func TestArchiveRoundTrip(t *testing.T) {
	var imgs []v1.Image
	for _, arch := range []string{"amd64", "arm64"} {
		base, err := Layer([]File{Regular("/etc/passwd", 0o644, []byte("root:x:0:0::/:/bin/sh\n"))}, epoch)
		if err != nil {
			t.Fatal(err)
		}
		app, err := Layer([]File{Regular("/app", 0o755, []byte("binary-"+arch))}, epoch)
		if err != nil {
			t.Fatal(err)
		}
		img, err := Image(Config{
			OS: "linux", Architecture: arch,
			Entrypoint: []string{"/app"}, User: "65532:65532", WorkingDir: "/",
			Env: []string{"PATH=/bin"}, Labels: map[string]string{"k": "v"}, Created: epoch,
		}, base, app)
		if err != nil {
			t.Fatal(err)
		}
		imgs = append(imgs, img)
	}
	idx, err := Index(map[string]string{"org.opencontainers.image.revision": "abc"}, imgs...)
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "app.tar")
	const ref = "ghcr.io/flockd/app:dev"
	if err := WriteArchive(out, ref, idx, epoch); err != nil {
		t.Fatal(err)
	}

	lp, top := readArchive(t, out)
	if len(top.Manifests) != 1 {
		t.Fatalf("index.json has %d entries, want 1", len(top.Manifests))
	}
	entry := top.Manifests[0]
	if entry.MediaType != types.OCIImageIndex {
		t.Errorf("index.json entry media type %s, want an image index", entry.MediaType)
	}
	for _, k := range []string{AnnotationContainerdName, AnnotationRefName} {
		if entry.Annotations[k] != ref {
			t.Errorf("index.json annotation %s = %q, want %q", k, entry.Annotations[k], ref)
		}
	}
	ii, err := lp.ImageIndex()
	if err != nil {
		t.Fatal(err)
	}
	child, err := ii.ImageIndex(entry.Digest)
	if err != nil {
		t.Fatal(err)
	}
	im, err := child.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if im.Annotations["org.opencontainers.image.revision"] != "abc" {
		t.Errorf("index annotations %v, want the revision", im.Annotations)
	}
	var plats []string
	for _, d := range im.Manifests {
		plats = append(plats, d.Platform.String())
		img, err := child.Image(d.Digest)
		if err != nil {
			t.Fatal(err)
		}
		cf, err := img.ConfigFile()
		if err != nil {
			t.Fatal(err)
		}
		if cf.OS+"/"+cf.Architecture != d.Platform.String() {
			t.Errorf("config platform %s/%s, index says %s", cf.OS, cf.Architecture, d.Platform)
		}
		c := cf.Config
		if !reflect.DeepEqual(c.Entrypoint, []string{"/app"}) || c.User != "65532:65532" || c.WorkingDir != "/" || c.Labels["k"] != "v" {
			t.Errorf("%s: config %+v", d.Platform, c)
		}
		if !cf.Created.Equal(epoch) {
			t.Errorf("%s: created %v, want %v", d.Platform, cf.Created, epoch)
		}
		ls, err := img.Layers()
		if err != nil || len(ls) != 2 {
			t.Fatalf("%s: %d layers (%v), want 2", d.Platform, len(ls), err)
		}
		rc := mutate.Extract(img)
		_, _, data := entries(t, rc)
		_ = rc.Close()
		if data["app"] != "binary-"+cf.Architecture || !strings.HasPrefix(data["etc/passwd"], "root:") {
			t.Errorf("%s: files app=%q etc/passwd=%q", d.Platform, data["app"], data["etc/passwd"])
		}
	}
	if !reflect.DeepEqual(plats, []string{"linux/amd64", "linux/arm64"}) {
		t.Errorf("platforms %v, want linux/amd64 and linux/arm64", plats)
	}

	// Reproducible: writing again gives the same bytes.
	first, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	again := filepath.Join(t.TempDir(), "again.tar")
	if err := WriteArchive(again, ref, idx, epoch); err != nil {
		t.Fatal(err)
	}
	second, err := os.ReadFile(again)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(first, second) {
		t.Error("two archives of the same index differ")
	}
}
