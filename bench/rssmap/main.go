// Command rssmap tells which parts of a Go binary a process mapped into its
// RSS. The kernel maps page cache around every page fault of a file mapping
// (fault-around, 64 KiB), so the file part of a process's RSS is about the
// number of distinct 64 KiB windows of the binary it touched. rssmap reads
// the page faults recorded by perf and prints, for each section of the
// binary, the windows first touched, and for .text the package of the code
// in each window (for .rodata and .gopclntab: the package of the code
// that touched it).
//
// Usage (the binary must be unstripped, built like the measured one):
//
//	CGO_ENABLED=0 go build -trimpath -o /tmp/pf ./cmd/peer-finder
//	perf record -e page-faults -c 1 -d -o /tmp/pf.data -- /tmp/pf <flags>   # stop it with SIGTERM
//	perf script -i /tmp/pf.data -F addr,ip | go run ./bench/rssmap -bin /tmp/pf
package main

import (
	"bufio"
	"cmp"
	"debug/elf"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
)

const window = 64 << 10

func main() {
	bin := flag.String("bin", "", "the unstripped binary the process ran")
	top := flag.Int("top", 40, "packages to print")
	list := flag.Bool("list", false, "also print every touched .text window with its first symbol")
	flag.Parse()
	if *bin == "" {
		fmt.Fprintln(os.Stderr, "rssmap: -bin is required")
		os.Exit(2)
	}
	if err := run(*bin, os.Stdin, os.Stdout, *top, *list); err != nil {
		fmt.Fprintln(os.Stderr, "rssmap:", err)
		os.Exit(1)
	}
}

type symbol struct {
	addr uint64
	name string
}

func run(bin string, in io.Reader, out io.Writer, top int, list bool) error {
	f, err := elf.Open(bin)
	if err != nil {
		return err
	}
	defer f.Close()
	syms, err := f.Symbols()
	if err != nil {
		return fmt.Errorf("%s has no symbols (built with -s?): %w", bin, err)
	}
	var ss []symbol
	for _, s := range syms {
		if s.Value != 0 && s.Section < elf.SectionIndex(len(f.Sections)) {
			ss = append(ss, symbol{s.Value, s.Name})
		}
	}
	slices.SortFunc(ss, func(a, b symbol) int { return cmp.Compare(a.addr, b.addr) })
	symAt := func(a uint64) string {
		i := sort.Search(len(ss), func(i int) bool { return ss[i].addr > a }) - 1
		if i < 0 {
			return "?"
		}
		return ss[i].name
	}
	section := func(a uint64) *elf.Section {
		for _, s := range f.Sections {
			if s.Flags&elf.SHF_ALLOC != 0 && s.Type != elf.SHT_NOBITS && a >= s.Addr && a < s.Addr+s.Size {
				return s
			}
		}
		return nil
	}

	seen := map[uint64]bool{}
	perSection := map[string]int{}
	textPkg := map[string]int{}
	toucher := map[string]int{}
	var textFirst []symbol
	sc := bufio.NewScanner(in)
	for sc.Scan() {
		fs := strings.Fields(sc.Text())
		if len(fs) < 2 {
			continue
		}
		addr, err1 := strconv.ParseUint(fs[0], 16, 64)
		ip, err2 := strconv.ParseUint(fs[1], 16, 64)
		if err1 != nil || err2 != nil {
			continue
		}
		s := section(addr)
		if s == nil || s.Flags&elf.SHF_WRITE != 0 || seen[addr/window] {
			continue
		}
		seen[addr/window] = true
		perSection[s.Name]++
		if s.Name == ".text" {
			textPkg[pkg(symAt(addr))]++
			textFirst = append(textFirst, symbol{addr / window * window, symAt(addr)})
		} else {
			toucher[s.Name+" by "+pkg(symAt(ip))]++
		}
	}
	if err := sc.Err(); err != nil {
		return err
	}
	total := 0
	for _, s := range f.Sections {
		if n, ok := perSection[s.Name]; ok {
			fmt.Fprintf(out, "%-12s %4d of %4d windows of 64 KiB touched (%5.1f MiB)\n", s.Name, n, (s.Size+window-1)/window, float64(n)/16)
			total += n
		}
	}
	fmt.Fprintf(out, "%-12s %4d windows (%5.1f MiB)\n", "total", total, float64(total)/16)
	fmt.Fprintln(out, "\n.text windows by the package of their code:")
	printTop(out, textPkg, top)
	fmt.Fprintln(out, "\nread-only data windows by the package of the code that touched them first:")
	printTop(out, toucher, top)
	if list {
		fmt.Fprintln(out, "\n.text windows:")
		for _, s := range textFirst {
			fmt.Fprintf(out, "%#x %s\n", s.addr, s.name)
		}
	}
	return nil
}

func printTop(out io.Writer, m map[string]int, n int) {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b string) int { return cmp.Or(cmp.Compare(m[b], m[a]), strings.Compare(a, b)) })
	for i, k := range keys {
		if i == n {
			break
		}
		fmt.Fprintf(out, "  %4d %s\n", m[k], k)
	}
}

// pkg returns the import path of a Go symbol name.
func pkg(name string) string {
	for _, p := range []string{"type:.eq.", "type:", "go:itab.*", "go:itab."} {
		name = strings.TrimPrefix(name, p)
	}
	if i := strings.IndexAny(name, "[,( "); i >= 0 {
		name = name[:i] // type arguments, an itab's interface, a method's receiver
	}
	i := strings.LastIndex(name, "/")
	if j := strings.Index(name[i+1:], "."); j >= 0 {
		return name[:i+1+j]
	}
	return name
}
