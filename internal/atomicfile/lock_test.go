package atomicfile

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestUpdateWaitsForTheLock holds the file's lock as another writer would
// and checks that Update neither writes nor reads meanwhile, and gives up
// when its context ends.
func TestUpdateWaitsForTheLock(t *testing.T) {
	path := filepath.Join(t.TempDir(), "hosts")
	if err := os.WriteFile(path, []byte("old\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	other, err := os.Open(path) // another open file description: another writer
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if err := syscall.Flock(int(other.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	called := false
	_, err = Update(ctx, path, 0o644, Auto, func([]byte) ([]byte, error) { called = true; return []byte("new\n"), nil })
	if !errors.Is(err, context.Canceled) || called {
		t.Fatalf("Update while locked: err = %v, fn called %v; want context.Canceled, not called", err, called)
	}
	assertFile(t, path, "old\n")

	if err := syscall.Flock(int(other.Fd()), syscall.LOCK_UN); err != nil {
		t.Fatal(err)
	}
	res, err := Update(context.Background(), path, 0o644, Auto, func(cur []byte) ([]byte, error) { return append(cur, "new\n"...), nil })
	if err != nil || res != Replaced {
		t.Fatalf("Update after unlock = %v, %v; want replaced, nil", res, err)
	}
	assertFile(t, path, "old\nnew\n")
	// A missing file is created under its directory's lock.
	fresh := filepath.Join(filepath.Dir(path), "fresh")
	if _, err := Update(context.Background(), fresh, 0o644, InPlace, func(cur []byte) ([]byte, error) {
		if cur != nil {
			t.Errorf("current of a missing file = %q, want nil", cur)
		}
		return []byte("x\n"), nil
	}); err != nil {
		t.Fatal(err)
	}
	assertFile(t, fresh, "x\n")
}

// TestUpdateLockWaitIsBounded: a lock another writer keeps (an operator's
// `flock -x hosts sleep 30`) makes Update and ReadFile fail after the
// writer's bound with ErrLocked naming the file, not wait for the holder;
// nothing is read or written meanwhile.
func TestUpdateLockWaitIsBounded(t *testing.T) {
	path := filepath.Join(t.TempDir(), "hosts")
	if err := os.WriteFile(path, []byte("old\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	other, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if err := syscall.Flock(int(other.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	w := writer{fs: osFS{}, lockWait: 200 * time.Millisecond}
	called := false
	began := time.Now()
	_, err = w.update(context.Background(), path, 0o644, Auto, func([]byte) ([]byte, error) { called = true; return []byte("new\n"), nil })
	if took := time.Since(began); !errors.Is(err, ErrLocked) || !strings.Contains(err.Error(), path) || called || took > 5*time.Second {
		t.Fatalf("Update while locked: err = %v, fn called %v after %v; want ErrLocked naming %s after about 200ms, fn not called", err, called, took, path)
	}
	assertFile(t, path, "old\n")
	if _, _, err := w.lock(context.Background(), path, syscall.LOCK_SH); !errors.Is(err, ErrLocked) {
		t.Fatalf("shared lock while locked: err = %v, want ErrLocked", err)
	}
}
