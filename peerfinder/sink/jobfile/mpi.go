package jobfile

import (
	"fmt"
	"strconv"
	"strings"
)

// Slots is -mpi-slots: a fixed count per member, or Auto (the pod's CPU
// request in whole CPUs, rounded down, at least 1).
type Slots struct {
	N    int
	Auto bool
}

// MaxSlots bounds a fixed slot count.
const MaxSlots = 1 << 20

// ParseSlots parses "auto" or a positive integer.
func ParseSlots(s string) (Slots, error) {
	if strings.EqualFold(strings.TrimSpace(s), "auto") {
		return Slots{Auto: true}, nil
	}
	n, err := strconv.Atoi(strings.TrimSpace(s))
	if err != nil || n < 1 || n > MaxSlots {
		return Slots{}, fmt.Errorf("%q: want auto or a whole number from 1 to %d", s, MaxSlots)
	}
	return Slots{N: n}, nil
}

// String returns the flag spelling.
func (s Slots) String() string {
	if s.Auto {
		return "auto"
	}
	return strconv.Itoa(max(s.N, 1))
}

// Of returns m's slot count. With Auto, a member without a peer (an
// expected name with no address yet, a retried pod between its two lives)
// or whose peer has no CPU request gets known[m.Name] when set, else 1.
func (s Slots) Of(m Member, known map[string]int) int {
	switch {
	case !s.Auto:
		return max(s.N, 1)
	case m.Peer != nil && m.Peer.CPUMillicores > 0:
		return max(int(m.Peer.CPUMillicores/1000), 1)
	case known[m.Name] > 0:
		return known[m.Name]
	}
	return 1
}

// IsHostfile reports whether content is an MPI hostfile as RenderHostfile
// writes one: every line that is not blank is "<name> slots=<N>". It is
// pure.
func IsHostfile(content []byte) bool {
	for line := range strings.Lines(string(content)) {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		n, ok := strings.CutPrefix(f[len(f)-1], "slots=")
		if _, err := strconv.Atoi(n); len(f) != 2 || !ok || err != nil {
			return false
		}
	}
	return true
}

// RenderHostfile returns the MPI hostfile of members: one "<name> slots=N"
// line each, in the given (rank) order. It is pure.
func RenderHostfile(members []Member, slots Slots, known map[string]int) []byte {
	var b strings.Builder
	for _, m := range members {
		fmt.Fprintf(&b, "%s slots=%d\n", m.Name, slots.Of(m, known))
	}
	return []byte(b.String())
}
