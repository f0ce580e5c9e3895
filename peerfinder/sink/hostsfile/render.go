package hostsfile

import (
	"bytes"
	"cmp"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/flockd/flock/peerfinder/peer"
)

// Entry is one line of the managed block: an address and its names.
type Entry struct {
	IP      string
	Name    string
	Aliases []string
	// Peer is the key of the peer the line is for; MakePlan sets it,
	// ReadBlock (which reads the file) cannot.
	Peer string
}

// Rejected is a peer, or a name of a peer, that was not written.
type Rejected struct {
	// Peer is the peer's key.
	Peer string
	// Reason says why, e.g. an invalid name or a template error.
	Reason string
}

// Plan is what the managed block will hold for one peer set.
type Plan struct {
	// Entries are the lines, sorted by name (naturally), IPv4 before IPv6.
	Entries []Entry
	// Pending are expected names that have no address yet, sorted.
	Pending []string
	// Rejected are peers skipped for invalid names or template errors.
	Rejected []Rejected
	// Shadowed are peers skipped because another peer got the same name
	// (e.g. a retried pod whose predecessor is still terminating).
	Shadowed []Rejected
	// Collisions are the names that several live (not terminating) peers
	// got, a name template that does not tell them apart, sorted by name.
	Collisions []Collision
	// WrongFamily are the keys of peers with addresses, none of the chosen
	// family (IPv6-only peers with IPv4), sorted; they get no line.
	WrongFamily []string
}

// Collision is a host name that several live peers got; only Peers[0]'s
// line is written.
type Collision struct {
	Name  string
	Peers []string
}

func (c Collision) String() string {
	return fmt.Sprintf("%s: %s written, %s left out", c.Name, c.Peers[0], strings.Join(c.Peers[1:], ", "))
}

// Complete reports whether every expected name has an address.
func (p Plan) Complete() bool { return len(p.Pending) == 0 }

// MakePlan computes the entries for set: one name per peer from the namer,
// validated (RFC 1123) and deduplicated, one line per address of the chosen
// family, plus the expected names still without an address. When several
// peers get the same name, the best one wins: not terminating, then ready,
// then the lowest key. It is pure.
func MakePlan(set peer.Set, n *Namer, family Family, expected []string) Plan {
	type candidate struct {
		p       peer.Peer
		aliases []string
		ips     []netip.Addr
	}
	var plan Plan
	byName := map[string]candidate{}
	live := map[string][]string{} // name -> keys of the live peers that got it
	for _, p := range set.Peers() {
		name, aliases, err := n.names(p)
		if err == nil {
			err = ValidName(name)
		}
		if err != nil {
			plan.Rejected = append(plan.Rejected, Rejected{Peer: p.Key(), Reason: err.Error()})
			continue
		}
		valid := aliases[:0:0]
		for _, a := range aliases {
			if err := ValidName(a); err != nil {
				plan.Rejected = append(plan.Rejected, Rejected{Peer: p.Key(), Reason: "alias: " + err.Error()})
				continue
			}
			valid = append(valid, a)
		}
		var ips []netip.Addr
		for _, s := range p.IPs {
			a, err := netip.ParseAddr(s)
			if err != nil {
				plan.Rejected = append(plan.Rejected, Rejected{Peer: p.Key(), Reason: fmt.Sprintf("invalid address %q", s)})
				continue
			}
			if family.keep(a) {
				ips = append(ips, a.Unmap())
			}
		}
		if len(ips) == 0 {
			if family != AllFamilies && len(p.IPs) > 0 {
				plan.WrongFamily = append(plan.WrongFamily, p.Key())
			}
			continue // no address of the family yet: pending if expected
		}
		if !p.Terminating {
			live[name] = append(live[name], p.Key())
		}
		c := candidate{p: p, aliases: valid, ips: ips}
		if old, ok := byName[name]; ok {
			winner, loser := old, c
			if better(c.p, old.p) {
				winner, loser = c, old
			}
			byName[name] = winner
			plan.Shadowed = append(plan.Shadowed, Rejected{Peer: loser.p.Key(), Reason: fmt.Sprintf("name %q taken by %s", name, winner.p.Key())})
			continue
		}
		byName[name] = c
	}
	for name, c := range byName {
		for _, ip := range c.ips {
			plan.Entries = append(plan.Entries, Entry{IP: ip.String(), Name: name, Aliases: c.aliases, Peer: c.p.Key()})
		}
	}
	slices.SortFunc(plan.Entries, func(a, b Entry) int {
		return cmp.Or(naturalCompare(a.Name, b.Name), compareIP(a.IP, b.IP))
	})
	for _, e := range expected {
		if _, ok := byName[e]; !ok {
			plan.Pending = append(plan.Pending, e)
		}
	}
	slices.SortFunc(plan.Pending, naturalCompare)
	plan.Pending = slices.Compact(plan.Pending)
	slices.SortFunc(plan.Shadowed, func(a, b Rejected) int { return strings.Compare(a.Peer, b.Peer) })
	for name, keys := range live {
		if len(keys) < 2 {
			continue
		}
		winner := byName[name].p.Key()
		slices.Sort(keys)
		keys = slices.DeleteFunc(keys, func(k string) bool { return k == winner })
		plan.Collisions = append(plan.Collisions, Collision{Name: name, Peers: append([]string{winner}, keys...)})
	}
	slices.SortFunc(plan.Collisions, func(a, b Collision) int { return naturalCompare(a.Name, b.Name) })
	slices.Sort(plan.WrongFamily)
	return plan
}

// better reports whether p should own a name rather than q.
func better(p, q peer.Peer) bool {
	if p.Terminating != q.Terminating {
		return !p.Terminating
	}
	if p.Ready != q.Ready {
		return p.Ready
	}
	return p.Key() < q.Key()
}

func compareIP(a, b string) int {
	x, _ := netip.ParseAddr(a)
	y, _ := netip.ParseAddr(b)
	return x.Compare(y) // IPv4 sorts before IPv6
}

// Markers returns the first and last line of the managed block for id.
func Markers(id string) (begin, end string) {
	suffix := ""
	if id != "" {
		suffix = " " + id
	}
	return "# BEGIN flock peer-finder" + suffix, "# END flock peer-finder" + suffix
}

// Block returns the managed block for plan, markers included, each line
// ending in "\n". Entries are "IP<TAB>name[ alias...]"; pending names are
// listed as comments.
func Block(id string, plan Plan) []byte {
	begin, end := Markers(id)
	var b bytes.Buffer
	b.WriteString(begin + "\n")
	for _, e := range plan.Entries {
		b.WriteString(e.IP + "\t" + e.Name)
		for _, a := range e.Aliases {
			b.WriteString(" " + a)
		}
		b.WriteByte('\n')
	}
	for _, name := range plan.Pending {
		b.WriteString("# no address yet: " + name + "\n")
	}
	b.WriteString(end + "\n")
	return b.Bytes()
}

// writerPrefix starts the comment line that names a block's writer.
const writerPrefix = "# written by "

// withWriter returns block with a line naming writer after its begin
// marker; block itself when writer is empty. Readers skip the line as a
// comment, so older readers and writers keep working with the block.
func withWriter(block []byte, writer string) []byte {
	if writer == "" {
		return block
	}
	writer = strings.Join(strings.Fields(writer), " ") // one line
	i := bytes.IndexByte(block, '\n') + 1
	return slices.Concat(block[:i], []byte(writerPrefix+writer+"\n"), block[i:])
}

// Render returns current with the managed block for id replaced by block;
// every byte outside the block is kept. When current has no block, the block
// is appended (after a newline if current does not end with one). Further
// blocks with the same id are removed. A begin marker without an end marker
// is an error: the file was edited by hand and guessing where our lines end
// could delete the user's.
func Render(current []byte, id string, block []byte) ([]byte, error) {
	begin, end := Markers(id)
	type span struct{ from, to int } // byte offsets, [from, to)
	var blocks []span
	open := -1
	for off := 0; off < len(current); {
		next := bytes.IndexByte(current[off:], '\n')
		lineEnd := len(current)
		if next >= 0 {
			lineEnd = off + next + 1
		}
		line := strings.TrimSpace(string(current[off:lineEnd])) // indented markers are ours too
		switch {
		case open < 0 && line == begin:
			open = off
		case open >= 0 && line == end:
			blocks = append(blocks, span{open, lineEnd})
			open = -1
		case open >= 0 && line == begin:
			return nil, fmt.Errorf("marker %q repeated before %q", begin, end)
		}
		off = lineEnd
	}
	if open >= 0 {
		return nil, fmt.Errorf("marker %q without %q", begin, end)
	}
	var out bytes.Buffer
	if len(blocks) == 0 {
		out.Write(current)
		if len(current) > 0 && current[len(current)-1] != '\n' {
			out.WriteByte('\n')
		}
		out.Write(block)
		return out.Bytes(), nil
	}
	prev := 0
	for i, s := range blocks {
		out.Write(current[prev:s.from])
		if i == 0 {
			out.Write(block)
		}
		prev = s.to
	}
	out.Write(current[prev:])
	return out.Bytes(), nil
}

// blockBody returns the lines of the first complete block for id in
// content, each trimmed and ending in "\n", without its markers and the
// line naming its writer, and that writer ("" when none is recorded): what
// tells two blocks' sets apart, whoever wrote them. ok is false when there
// is no complete block.
func blockBody(content []byte, id string) (body []byte, writer string, ok bool) {
	begin, end := Markers(id)
	in, first := false, false
	for raw := range bytes.Lines(content) {
		line := strings.TrimSpace(string(raw))
		switch {
		case !in:
			in, first = line == begin, true
			continue
		case line == end:
			return body, writer, true
		case first && strings.HasPrefix(line, writerPrefix):
			writer = strings.TrimPrefix(line, writerPrefix)
		default:
			body = append(append(body, line...), '\n')
		}
		first = false
	}
	return nil, "", false
}
