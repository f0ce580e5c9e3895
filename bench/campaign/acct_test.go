package main

import (
	"encoding/binary"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"

	"github.com/flockd/flock/internal/testing/need"
)

// acctRecord encodes one struct acct_v3 as the kernel writes it.
func acctRecord(version byte, comm string, pid, begin uint32, utime, stime uint16) []byte {
	r := make([]byte, acctRecordSize)
	r[1] = version
	binary.LittleEndian.PutUint32(r[16:], pid)
	binary.LittleEndian.PutUint32(r[24:], begin)
	binary.LittleEndian.PutUint16(r[32:], utime)
	binary.LittleEndian.PutUint16(r[34:], stime)
	copy(r[48:], comm)
	return r
}

func TestParseAcct(t *testing.T) {
	var b []byte
	b = append(b, acctRecord(3, "runc", 42, 1000, 4, 1)...)
	b = append(b, acctRecord(2, "old", 43, 1000, 9, 9)...) // another version: skipped
	// A full 16-byte name has no NUL; 2<<13|100 is 100 * 8^2 ticks.
	b = append(b, acctRecord(3, "containerd-shim-", 44, 1001, 2<<13|100, 0)...)
	b = append(b, acctRecord(3, "torn", 45, 1002, 1, 1)[:40]...) // a torn last record: skipped
	got := parseAcct(b)
	want := []endedProc{
		{comm: "runc", pid: 42, begin: 1000, cpu: 0.05},
		{comm: "containerd-shim-", pid: 44, begin: 1001, cpu: 64},
	}
	if !slices.Equal(got, want) {
		t.Fatalf("parseAcct = %+v; want %+v", got, want)
	}
}

// TestAcctRun turns on this machine's process accounting and finds a
// child that burned CPU among what ended, with its pid and CPU time.
func TestAcctRun(t *testing.T) {
	need.Root(t, "process accounting (acct(2))")
	path := filepath.Join(t.TempDir(), "acct")
	ended, err := acctRun(path)
	if err != nil {
		t.Fatal(err)
	}
	defer ended()
	// About 0.3 s of CPU in a shell loop.
	cmd := exec.Command("/bin/sh", "-c", `i=0; while [ $i -lt 300000 ]; do i=$((i+1)); done`)
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	procs := ended()
	i := slices.IndexFunc(procs, func(p endedProc) bool { return p.pid == cmd.Process.Pid })
	if i < 0 {
		t.Fatalf("pid %d not among the %d processes that ended", cmd.Process.Pid, len(procs))
	}
	p := procs[i]
	used := cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	if p.comm != "sh" || p.cpu < 0.5*used.Seconds() || p.cpu > 2*used.Seconds()+0.02 {
		t.Errorf("record %+v; want sh with about the %s of CPU it used", p, used)
	}
	if again := ended(); !slices.Equal(again, procs) {
		t.Errorf("a second call returned %d records; want the same %d", len(again), len(procs))
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Errorf("accounting file left: %v", err)
	}
}
