package main

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"log/slog"
	"math"
	"os"
	"sync"

	"golang.org/x/sys/unix"
)

// What processes that end during a run spent: /proc forgets a process at
// its exit, so the campaign turns on the kernel's process accounting
// (acct(2), version 3 records), which writes one record per process as it
// exits: its command name, pid, start and the CPU time of all its threads.
// That names the API servers the faults restart, the kubelets of killed
// nodes, each `runc` a shim starts and the shims of removed containers.

// endedProc is one process accounting record.
type endedProc struct {
	comm  string
	pid   int
	begin int64   // start, seconds since the epoch
	cpu   float64 // user + system seconds
}

// acctRecordSize is the size of struct acct_v3 (linux/acct.h).
const acctRecordSize = 64

// startAcct turns process accounting on, writing to path (truncated). The
// machine has one accounting file: another's is replaced until stop, which
// turns accounting off and returns what ended meanwhile. A campaign killed
// before stop leaves it on, 64 bytes per process that ends (the kernel
// pauses it below 2 % free space); `accton off`, or the next campaign's
// stop, turns it off.
func startAcct(path string) (stop func() ([]endedProc, error), err error) {
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		return nil, fmt.Errorf("process accounting file: %w", err)
	}
	if err := unix.Acct(path); err != nil {
		return nil, fmt.Errorf("turn on process accounting to %s: %w", path, err)
	}
	return func() ([]endedProc, error) {
		// acct(NULL) turns it off; unix.Acct takes a path.
		if _, _, errno := unix.Syscall(unix.SYS_ACCT, 0, 0, 0); errno != 0 {
			return nil, fmt.Errorf("turn off process accounting: %w", errno)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("read process accounting: %w", err)
		}
		return parseAcct(b), nil
	}, nil
}

// acctRun turns process accounting on into path; ended turns it off
// (once; later calls return the same), removes path and returns what ended
// meanwhile, nil if accounting could not be turned on or read.
func acctRun(path string) (ended func() []endedProc, err error) {
	stop, err := startAcct(path)
	if err != nil {
		return func() []endedProc { return nil }, err
	}
	return sync.OnceValue(func() []endedProc {
		defer os.Remove(path)
		procs, err := stop()
		if err != nil {
			slog.Error("process accounting", "err", err)
			return nil
		}
		return procs
	}), nil
}

// parseAcct decodes version 3 little-endian records; others, and a torn
// last record, are skipped.
func parseAcct(b []byte) []endedProc {
	var out []endedProc
	le := binary.LittleEndian
	for ; len(b) >= acctRecordSize; b = b[acctRecordSize:] {
		r := b[:acctRecordSize]
		if r[1] != 3 { // ac_version; ACCT_BYTEORDER (0x80) set means big-endian
			continue
		}
		comm, _, _ := bytes.Cut(r[48:64], []byte{0})
		ticks := decodeComp(le.Uint16(r[32:])) + decodeComp(le.Uint16(r[34:]))
		out = append(out, endedProc{
			comm:  string(comm),
			pid:   int(le.Uint32(r[16:])),
			begin: int64(le.Uint32(r[24:])),
			cpu:   ticks / acctHZ,
		})
	}
	return out
}

// acctHZ is the unit of the records' times (AHZ).
const acctHZ = 100

// decodeComp decodes a comp_t: a 13-bit mantissa and a 3-bit base-8 exponent.
func decodeComp(v uint16) float64 {
	return float64(v&0x1fff) * math.Pow(8, float64(v>>13))
}
