package hostsfile

import (
	"os"
	"syscall"
	"time"
)

// fileState is what stat(2) says about a file that a rewrite changes: a
// rewrite in place changes size, mtime or ctime, a replace the inode.
type fileState struct {
	dev, ino     uint64
	size         int64
	mtime, ctime syscall.Timespec
}

func stateOf(path string) (fileState, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return fileState{}, err
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return fileState{}, nil // zero: never equal to a file read, so always read
	}
	return fileState{dev: st.Dev, ino: st.Ino, size: st.Size, mtime: st.Mtim, ctime: st.Ctim}, nil
}

// racy reports whether the file changed less than racyWindow before now:
// a later rewrite could then leave every field as it is.
func (f fileState) racy(now time.Time) bool {
	changed := time.Unix(f.mtime.Unix())
	if c := time.Unix(f.ctime.Unix()); c.After(changed) {
		changed = c
	}
	return now.Sub(changed) < racyWindow
}
