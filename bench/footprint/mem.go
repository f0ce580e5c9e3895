package main

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strconv"
	"strings"
	"time"
)

// smaps is what a process's pages cost, in KiB, from /proc/<pid>/smaps_rollup.
type smaps struct {
	rss, pss                   int64
	privateClean, privateDirty int64
	sharedClean, sharedDirty   int64
}

// uss is the process's private memory: pages no other process maps, freed
// when it exits.
func (s smaps) uss() int64 { return s.privateClean + s.privateDirty }

// shared is the memory of pages that other processes map too.
func (s smaps) shared() int64 { return s.sharedClean + s.sharedDirty }

// parseSmaps sums the kB fields of smaps_rollup text, or of smaps text (one
// block per mapping) on kernels without smaps_rollup.
func parseSmaps(text string) (smaps, error) {
	var s smaps
	fields := map[string]*int64{
		"Rss": &s.rss, "Pss": &s.pss,
		"Private_Clean": &s.privateClean, "Private_Dirty": &s.privateDirty,
		"Shared_Clean": &s.sharedClean, "Shared_Dirty": &s.sharedDirty,
	}
	seen := 0
	for line := range strings.Lines(text) {
		k, v, ok := strings.Cut(line, ":")
		p := fields[k]
		if !ok || p == nil {
			continue
		}
		v, isKB := strings.CutSuffix(strings.TrimSpace(v), " kB")
		n, err := strconv.ParseInt(v, 10, 64)
		if !isKB || err != nil {
			return smaps{}, fmt.Errorf("malformed smaps line %q", strings.TrimSpace(line))
		}
		*p += n
		seen++
	}
	if seen < len(fields) {
		return smaps{}, errors.New("smaps without Rss, Pss, Private_* and Shared_*")
	}
	return s, nil
}

// readSmaps reads pid's smaps_rollup, or sums its smaps without it.
func readSmaps(pid int) (smaps, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/smaps_rollup", pid))
	if errors.Is(err, fs.ErrNotExist) {
		b, err = os.ReadFile(fmt.Sprintf("/proc/%d/smaps", pid))
	}
	if err != nil {
		return smaps{}, fmt.Errorf("read smaps: %w", err)
	}
	return parseSmaps(string(b))
}

// errNoPFN: /proc/<pid>/pagemap hides page frame numbers without CAP_SYS_ADMIN.
var errNoPFN = errors.New("pagemap without page frame numbers (needs root)")

// addFrames adds to frames the page frame number of every present page in
// pagemap entries (8 bytes each, little endian: bit 63 present, bits 0-54
// the frame when present).
func addFrames(entries []byte, frames map[uint64]struct{}) error {
	for len(entries) >= 8 {
		e := binary.LittleEndian.Uint64(entries)
		entries = entries[8:]
		if e&(1<<63) == 0 {
			continue
		}
		pfn := e & (1<<55 - 1)
		if pfn == 0 {
			return errNoPFN
		}
		frames[pfn] = struct{}{}
	}
	return nil
}

// addPages adds to frames the physical pages pid's memory maps: a page
// mapped by several processes (the binary's page cache) is one frame.
func addPages(pid int, frames map[uint64]struct{}) error {
	maps, err := os.Open(fmt.Sprintf("/proc/%d/maps", pid))
	if err != nil {
		return fmt.Errorf("read maps: %w", err)
	}
	defer maps.Close()
	pm, err := os.Open(fmt.Sprintf("/proc/%d/pagemap", pid))
	if err != nil {
		return fmt.Errorf("read pagemap: %w", err)
	}
	defer pm.Close()
	page := uint64(os.Getpagesize())
	buf := make([]byte, 8<<10*8)
	sc := bufio.NewScanner(maps)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 2 || f[1] == "---p" || len(f) > 5 && f[5] == "[vsyscall]" {
			continue // reserved address space (no page is accessible), or outside the page tables
		}
		lo, hi, _ := strings.Cut(f[0], "-")
		start, err1 := strconv.ParseUint(lo, 16, 64)
		end, err2 := strconv.ParseUint(hi, 16, 64)
		if err := errors.Join(err1, err2); err != nil {
			return fmt.Errorf("parse maps: %w", err)
		}
		for off := start / page * 8; off < end/page*8; {
			n := min(uint64(len(buf)), end/page*8-off)
			got, err := pm.ReadAt(buf[:n], int64(off))
			if err != nil && !errors.Is(err, io.EOF) {
				return fmt.Errorf("read pagemap: %w", err)
			}
			if got == 0 {
				break
			}
			if err := addFrames(buf[:got], frames); err != nil {
				return err
			}
			off += uint64(got)
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("read maps: %w", err)
	}
	return nil
}

// together is the memory, in KiB, of the distinct physical pages the
// processes pids map: what they cost the node together.
func together(pids []int) (int64, error) {
	frames := make(map[uint64]struct{})
	for _, pid := range pids {
		if err := addPages(pid, frames); err != nil {
			return 0, err
		}
	}
	return int64(len(frames)) * int64(os.Getpagesize()) / 1024, nil
}

// sampleTogether is the mean of together(pids) over window, read every
// second.
func sampleTogether(pids []int, window time.Duration) (int64, error) {
	var sum int64
	n, err := eachSecond(window, func() error {
		kib, err := together(pids)
		sum += kib
		return err
	})
	if err != nil {
		return 0, err
	}
	return sum / n, nil
}

// eachSecond calls read at once and then every second until window has
// passed, and returns how many times it did; an error stops it.
func eachSecond(window time.Duration, read func() error) (int64, error) {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	end := time.Now().Add(window)
	for n := int64(1); ; n++ {
		if err := read(); err != nil {
			return n, err
		}
		if !time.Now().Before(end) {
			return n, nil
		}
		<-tick.C
	}
}
