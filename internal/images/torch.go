package images

import (
	"context"
	"fmt"
	"path"
	"strings"

	"github.com/flockd/flock/internal/imagebuild"
)

// TorchApp is ghcr.io/flockd/apps/torch: Debian's PyTorch 1.13
// (python3-torch) on the CPU, with torch.distributed's gloo backend, for
// examples/batch/torch. It is large (~530 MB unpacked: libtorch links
// OpenCV and FFmpeg, and they their own libraries), so `make images` does
// not build it: `make test-torch` does (hack/images -torch).
const TorchApp = "apps/torch"

// Debian packages of the torch image (amd64; bookworm). TorchPackages
// are per architecture: those whose files the image takes (torchPaths picks
// them), then the libraries their programs and modules link, as loaded by
// `import torch` and a gloo process group (taken as needed: the ELF
// closure). TorchCommonPackages are architecture-independent Python
// modules torch imports. Left out of python3-torch's dependencies because
// `import torch` and torch.distributed do not import them: sympy,
// hypothesis, the tests (libtorch-test), yaml, requests, psutil, future.
var (
	TorchPackages = []string{
		"python3-minimal", "python3.11-minimal", "libpython3.11-minimal", "libpython3.11-stdlib",
		"python3-torch", "libtorch1.13", "python3-numpy",
		// The shell and the libraries.
		"busybox-static", "libc6",
		"libaec0", "libaom3", "libcrypt1", "libarmadillo11", "libarpack2", "libavcodec59", "libavformat59", "libavutil57",
		"libblas3", "libblkid1", "libblosc1", "libbluray2", "libbrotli1", "libbsd0", "libbz2-1.0",
		"libcairo-gobject2", "libcairo2", "libcfitsio10", "libcharls2", "libchromaprint1", "libcjson1",
		"libcodec2-1.0", "libcom-err2", "libcpuinfo0", "libcurl3-gnutls", "libcurl4", "libdatrie1", "libdav1d6",
		"libdc1394-25", "libde265-0", "libdeflate0", "libdnnl2", "libdouble-conversion3", "libdrm2", "libdw1",
		"libelf1", "libexif12", "libexpat1", "libffi8", "libfmt9", "libfontconfig1", "libfreetype6", "libfreexl1",
		"libfribidi0", "libfyba0", "libgcc-s1", "libgcrypt20", "libgdal32", "libgdcm3.0", "libgdk-pixbuf-2.0-0",
		"libgeos-c1v5", "libgeos3.11.1", "libgeotiff5", "libgflags2.2", "libgfortran5", "libgif7", "libgl1",
		"libglib2.0-0", "libgloo0", "libglvnd0", "libglx0", "libgme0", "libgmp10", "libgnutls30", "libgomp1",
		"libgoogle-glog0v6", "libgpg-error0", "libgphoto2-6", "libgphoto2-port12", "libgraphite2-3", "libgsm1",
		"libgssapi-krb5-2", "libgstreamer-plugins-base1.0-0", "libgstreamer1.0-0", "libharfbuzz0b", "libhdf4-0-alt",
		"libhdf5-103-1", "libhdf5-hl-100", "libheif1", "libhiredis0.14", "libhogweed6", "libhwy1", "libibverbs1",
		"libicu72", "libidn2-0", "libimath-3-1-29", "libjbig0", "libjpeg62-turbo", "libjson-c5", "libjxl0.7",
		"libk5crypto3", "libkeyutils1", "libkmlbase1", "libkmldom1", "libkmlengine1", "libkrb5-3", "libkrb5support0",
		"liblapack3", "liblcms2-2", "libldap-2.5-0", "liblerc4", "libleveldb1d", "liblmdb0", "libltdl7", "liblz4-1",
		"liblzma5", "libmariadb3", "libmbedcrypto7", "libmd0", "libmd4c0", "libmfx1", "libminizip1", "libmount1",
		"libmp3lame0", "libmpg123-0", "libnetcdf19", "libnettle8", "libnghttp2-14", "libnl-3-200",
		"libnl-route-3-200", "libnorm1", "libnspr4", "libnss3", "libnuma1", "libodbc2", "libodbcinst2", "libogdi4.1",
		"libogg0", "libonnx1", "libopencv-calib3d406", "libopencv-contrib406", "libopencv-core406",
		"libopencv-dnn406", "libopencv-features2d406", "libopencv-flann406", "libopencv-highgui406",
		"libopencv-imgcodecs406", "libopencv-imgproc406", "libopencv-video406", "libopencv-videoio406",
		"libopenexr-3-1-30", "libopengl0", "libopenjp2-7", "libopenmpt0", "libopus0", "liborc-0.4-0", "libp11-kit0",
		"libpango-1.0-0", "libpangocairo-1.0-0", "libpangoft2-1.0-0", "libpcre2-16-0", "libpcre2-8-0",
		"libpgm-5.3-0", "libpixman-1-0", "libpng16-16", "libpoppler126", "libpq5", "libproj25", "libprotobuf32",
		"libpsl5", "libpthreadpool0", "libqhull-r8.0", "libqt5core5a", "libqt5gui5", "libqt5opengl5", "libqt5test5",
		"libqt5widgets5", "libquadmath0", "librabbitmq4", "librav1e0", "libraw1394-11", "librist4", "librsvg2-2",
		"librtmp1", "librttopo1", "libsasl2-2", "libselinux1", "libshine3", "libsleef3", "libsnappy1v5",
		"libsodium23", "libsoxr0", "libspatialite7", "libspeex1", "libsqlite3-0", "libsrt1.5-gnutls",
		"libssh-gcrypt-4", "libssh2-1", "libssl3", "libstdc++6", "libsuperlu5", "libsvtav1enc1", "libswresample4",
		"libswscale6", "libsz2", "libtasn1-6", "libtbb12", "libtensorpipe0", "libthai0", "libtheora0", "libtiff6",
		"libtirpc3", "libtwolame0", "libudev1", "libudfread0", "libunistring2", "libunwind8", "liburiparser1",
		"libusb-1.0-0", "libuuid1", "libuv1", "libva-drm2", "libva-x11-2", "libva2", "libvdpau1", "libvorbis0a",
		"libvorbisenc2", "libvorbisfile3", "libvpx7", "libwebp7", "libwebpmux3", "libx11-6", "libx11-xcb1",
		"libx264-164", "libx265-199", "libxau6", "libxcb-dri3-0", "libxcb-render0", "libxcb-shm0", "libxcb1",
		"libxdmcp6", "libxerces-c3.2", "libxext6", "libxfixes3", "libxml2", "libxnnpack0", "libxrender1",
		"libxvidcore4", "libzmq5", "libzstd1", "libzvbi0", "ocl-icd-libopencl1", "zlib1g",
	}
	TorchCommonPackages = []string{"python3-six", "python3-astunparse", "python3-typing-extensions"}
)

// torchContent is how many of TorchPackages the image takes files from
// (the rest are libraries).
const torchContent = 7

// torchPaths says which files of a content package the torch image keeps:
// Python and its standard library (as the MPI image's), torch's Python
// package without its test programs (torch_shm_manager kept), internal test helpers, C++ headers
// and CMake files, and its library links but Caffe2's (test and detectron
// operators nothing loads), libtorch's libraries, numpy without its tests,
// headers and distutils, and the pure-Python modules torch imports.
func torchPaths(pkg, p string) bool {
	const dist = "/usr/lib/python3/dist-packages/"
	switch pkg {
	case "python3.11-minimal":
		return p == "/usr/bin/python3.11"
	case "python3-minimal":
		return p == "/usr/bin/python3"
	case "libpython3.11-minimal", "libpython3.11-stdlib":
		return pythonStdlib(p)
	case "python3-torch":
		if strings.HasPrefix(p, dist+"torch/bin/") {
			return path.Base(p) == "torch_shm_manager" // import torch checks it is there
		}
		for _, s := range []string{"/torch/bin/", "/torch/testing/_internal/", "/torch/include/", "/torch/share/",
			"/lib/libcaffe2_"} {
			if strings.Contains(p, s) {
				return false
			}
		}
		return strings.HasPrefix(p, dist+"torch/") && !strings.HasSuffix(p, ".pyi")
	case "libtorch1.13":
		return strings.Contains(p, "/lib/") && !strings.HasPrefix(path.Base(p), "libcaffe2_")
	case "python3-numpy":
		for _, s := range []string{"/tests/", "/core/include/", "/distutils/", "/f2py/"} {
			if strings.Contains(p, s) {
				return false
			}
		}
		return strings.HasPrefix(p, dist+"numpy/") && !strings.HasSuffix(p, ".pyi") && !strings.HasSuffix(p, ".pxd")
	case "python3-six":
		return p == dist+"six.py"
	case "python3-astunparse":
		return strings.HasPrefix(p, dist+"astunparse/")
	case "python3-typing-extensions":
		return p == dist+"typing_extensions.py"
	}
	return false
}

// TorchRoot returns the torch image's root filesystem for goarch in two
// layers: the system (busybox, /etc, the libraries, libblas.so.3 and
// liblapack.so.3 linked as Debian's alternatives link them) and the
// application (Python, torch, libtorch, numpy, picked by torchPaths). pkgs
// must hold TorchPackages for goarch, common TorchCommonPackages; a
// library a program or module needs that none of them has is an error.
func TorchRoot(goarch string, pkgs, common map[string]Package) (system, app []imagebuild.File, err error) {
	triplet, ok := triplets[goarch]
	if !ok {
		return nil, nil, fmt.Errorf("torch image: unsupported GOARCH %q", goarch)
	}
	r, err := pickContent(pkgs, common, append(TorchPackages[:torchContent:torchContent], TorchCommonPackages...), TorchPackages[torchContent:], torchPaths)
	if err != nil {
		return nil, nil, fmt.Errorf("torch image: %w", err)
	}
	lib := "/usr/lib/" + triplet
	for _, l := range []string{"blas/libblas.so.3", "lapack/liblapack.so.3"} {
		p := path.Join(lib, path.Base(l))
		r.from[p] = imagebuild.Symlink(p, l)
	}
	if _, err := imagebuild.WithLibraries(r.files, r.from, []string{"/lib/" + triplet, lib, "/usr/lib"}, r.elfs...); err != nil {
		return nil, nil, fmt.Errorf("torch image: %w", err)
	}
	system, app = r.layers()
	return system, app, nil
}

// BuildTorch builds the torch image for o.Arch into o.OutDir.
func BuildTorch(ctx context.Context, o AppOptions) (Archive, error) {
	pkgs, common, all, err := unpackApp(ctx, o, TorchPackages, TorchCommonPackages)
	if err != nil {
		return Archive{}, err
	}
	system, app, err := TorchRoot(o.Arch, pkgs, common)
	if err != nil {
		return Archive{}, err
	}
	return writeApp(o, TorchApp, imagebuild.Config{
		Entrypoint: []string{"/bin/sh"},
		User:       fmt.Sprintf("%d:%d", UID, GID),
	}, all, system, app)
}
