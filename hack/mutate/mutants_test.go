package main

import (
	"slices"
	"strings"
	"testing"
)

const sample = `package p

import "log/slog"

func f(a, b int, ok bool, log *slog.Logger) int {
	if a < b && !ok {
		a++
	}
	log.Info("x", "big", a > 10)
	x := a + 1
	return x
}
`

func TestMutantsOf(t *testing.T) {
	ms, err := mutantsOf("p.go", []byte(sample))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, m := range ms {
		line := strings.Split(string(m.Apply([]byte(sample))), "\n")[m.Line-1]
		got = append(got, m.Op+": "+strings.TrimSpace(line))
	}
	want := []string{
		"negate-comparison: if a >= b && !ok {",
		"comparison-boundary: if a <= b && !ok {",
		"swap-logical: if a < b || !ok {",
		"drop-not: if a < b && ok {",
		"drop-statement: {}",
		"swap-arithmetic: x := a - 1",
		"change-constant: x := a + 0",
	}
	if !slices.Equal(got, want) {
		t.Errorf("mutants:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestSpread(t *testing.T) {
	ms := make([]Mutant, 10)
	for i := range ms {
		ms[i].Line = i
	}
	var lines []int
	for _, m := range spread(ms, 3) {
		lines = append(lines, m.Line)
	}
	if !slices.Equal(lines, []int{0, 3, 6}) {
		t.Errorf("spread(10, 3) picked lines %v", lines)
	}
	if len(spread(ms, 0)) != 10 || len(spread(ms, 20)) != 10 {
		t.Error("spread without a bound dropped mutants")
	}
}
