package images

import "testing"

// TestTorchPaths checks which files of its content packages the torch
// image keeps: what import torch and a gloo process group load (seen in a
// chroot of the packages: /proc/self/maps and sys.modules), not torch's
// test programs, headers or Caffe2's test libraries, nor numpy's tests.
func TestTorchPaths(t *testing.T) {
	const dist = "/usr/lib/python3/dist-packages/"
	for _, tc := range []struct {
		pkg, path string
		keep      bool
	}{
		{"python3-torch", dist + "torch/__init__.py", true},
		{"python3-torch", dist + "torch/_C.cpython-311-x86_64-linux-gnu.so", true},
		{"python3-torch", dist + "torch/distributed/distributed_c10d.py", true},
		{"python3-torch", dist + "torch/lib/libtorch_global_deps.so", true},
		{"python3-torch", dist + "torch/bin/torch_shm_manager", true},
		{"python3-torch", dist + "torch/bin/test_api", false},
		{"python3-torch", dist + "torch/testing/_internal/common_utils.py", false},
		{"python3-torch", dist + "torch/include/ATen/ATen.h", false},
		{"python3-torch", dist + "torch/lib/libcaffe2_module_test_dynamic.so", false},
		{"python3-torch", dist + "torch/_C/__init__.pyi", false},
		{"python3-torch", dist + "torchgen/model.py", false},
		{"libtorch1.13", "/usr/lib/x86_64-linux-gnu/libtorch_cpu.so.1.13.0", true},
		{"libtorch1.13", "/usr/lib/x86_64-linux-gnu/libcaffe2_detectron_ops.so.1.13.0", false},
		{"libtorch1.13", "/usr/share/doc/libtorch1.13/copyright", false},
		{"python3-numpy", dist + "numpy/core/_multiarray_umath.cpython-311-x86_64-linux-gnu.so", true},
		{"python3-numpy", dist + "numpy/core/tests/test_api.py", false},
		{"python3-numpy", dist + "numpy/f2py/__init__.py", false},
		{"python3-six", dist + "six.py", true},
		{"python3-typing-extensions", dist + "typing_extensions.py", true},
		{"libpython3.11-stdlib", "/usr/lib/python3.11/pickle.py", true},
		{"libpython3.11-stdlib", "/usr/lib/python3.11/test/test_os.py", false},
		{"python3-sympy", dist + "sympy/__init__.py", false},
	} {
		if got := torchPaths(tc.pkg, tc.path); got != tc.keep {
			t.Errorf("torchPaths(%s, %s) = %v, want %v", tc.pkg, tc.path, got, tc.keep)
		}
	}
}
