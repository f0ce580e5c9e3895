package main

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/flockd/flock/internal/testing/await"
)

// rollup is /proc/<pid>/smaps_rollup of a flock peer-finder (-source=static)
// while a second one ran from the same binary file (kernel 6.18).
const rollup = `00400000-7ffd26f45000 ---p 00000000 00:00 0                              [rollup]
Rss:               16216 kB
Pss:                9362 kB
Pss_Dirty:          9362 kB
Pss_Anon:           2516 kB
Pss_File:           6846 kB
Pss_Shmem:             0 kB
Shared_Clean:          8 kB
Shared_Dirty:      13692 kB
Private_Clean:         0 kB
Private_Dirty:      2516 kB
Referenced:        16216 kB
Anonymous:          2516 kB
KSM:                   0 kB
LazyFree:              0 kB
AnonHugePages:         0 kB
ShmemPmdMapped:        0 kB
FilePmdMapped:         0 kB
Shared_Hugetlb:        0 kB
Private_Hugetlb:       0 kB
Swap:                  0 kB
SwapPss:               0 kB
Locked:                0 kB
`

func TestParseSmapsRollup(t *testing.T) {
	s, err := parseSmaps(rollup)
	if err != nil {
		t.Fatal(err)
	}
	if s.rss != 16216 || s.pss != 9362 || s.uss() != 2516 || s.shared() != 13700 {
		t.Errorf("rss %d pss %d uss %d shared %d kB, want 16216 9362 2516 13700", s.rss, s.pss, s.uss(), s.shared())
	}
}

// Without smaps_rollup the per-mapping blocks of smaps are summed.
func TestParseSmapsSumsMappings(t *testing.T) {
	block := strings.SplitAfterN(rollup, "\n", 2)[1]
	s, err := parseSmaps("00400000-00401000 r-xp 00000000 fd:00 12 /pf\n" + block + "00402000-00403000 rw-p 00000000 00:00 0\n" + block)
	if err != nil {
		t.Fatal(err)
	}
	if s.pss != 2*9362 || s.uss() != 2*2516 || s.shared() != 2*13700 {
		t.Errorf("pss %d uss %d shared %d kB, want twice one block's", s.pss, s.uss(), s.shared())
	}
}

func TestParseSmapsRejects(t *testing.T) {
	for name, text := range map[string]string{
		"no Private_Dirty": strings.Replace(rollup, "Private_Dirty:", "Private_Dirt:", 1),
		"not kB":           strings.Replace(rollup, "Pss:                9362 kB", "Pss: 9362", 1),
		"empty":            "",
	} {
		if _, err := parseSmaps(text); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

func TestAddFrames(t *testing.T) {
	entry := func(e uint64) []byte { return binary.LittleEndian.AppendUint64(nil, e) }
	var b []byte
	b = append(b, entry(1<<63|7)...)             // present, frame 7
	b = append(b, entry(1<<63|1<<62|1<<55|7)...) // the same frame again, other flag bits set
	b = append(b, entry(42)...)                  // not present: bits 0-54 mean nothing
	b = append(b, entry(1<<63|1<<54)...)         // the highest frame bit
	frames := make(map[uint64]struct{})
	if err := addFrames(b, frames); err != nil {
		t.Fatal(err)
	}
	if len(frames) != 2 {
		t.Errorf("frames %v, want 7 and 1<<54", frames)
	}
	for _, f := range []uint64{7, 1 << 54} {
		if _, ok := frames[f]; !ok {
			t.Errorf("frame %#x missing from %v", f, frames)
		}
	}
	if err := addFrames(entry(1<<63), frames); !errors.Is(err, errNoPFN) {
		t.Errorf("present page without a frame: %v, want errNoPFN", err)
	}
}

// asleep starts a sleep(1) that lasts the test and returns its pid once it
// sleeps: an idle process whose pages stay put while they are read. (The
// test process itself will not do: reading its pages grows its heap.)
func asleep(t *testing.T) int {
	t.Helper()
	cmd := exec.Command("sleep", "1h")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	pid := cmd.Process.Pid
	await.Until(t, func() bool {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		_, after, ok := strings.Cut(string(b), ") ")
		return err == nil && ok && strings.HasPrefix(after, "S")
	}, "sleep (pid %d) asleep", pid)
	return pid
}

// Each page is counted once: a process counted twice costs what it costs
// once (its Rss), and two processes of one binary share their file pages.
func TestTogetherCountsAPageOnce(t *testing.T) {
	a, b := asleep(t), asleep(t)
	one, err := together([]int{a})
	if errors.Is(err, errNoPFN) {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	sa, err := readSmaps(a)
	if err != nil {
		t.Fatal(err)
	}
	sb, err := readSmaps(b)
	if err != nil {
		t.Fatal(err)
	}
	if one < sa.rss*9/10 || one > sa.rss*11/10 {
		t.Errorf("together %d KiB, Rss %d KiB", one, sa.rss)
	}
	twice, err := together([]int{a, a})
	if err != nil {
		t.Fatal(err)
	}
	if twice > one*11/10 {
		t.Errorf("twice the same process: %d KiB, once %d KiB", twice, one)
	}
	both, err := together([]int{a, b})
	if err != nil {
		t.Fatal(err)
	}
	if sum := sa.rss + sb.rss; both < one || both > sum*9/10 {
		t.Errorf("two sleeps together %d KiB, want between one's %d KiB and well under the sum of their Rss %d KiB", both, one, sum)
	}
}
