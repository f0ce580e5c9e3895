package hook

import (
	"fmt"

	"github.com/flockd/flock/peerfinder/sink"
)

// Format selects what a hook reads on stdin.
type Format string

const (
	// FormatLines is upstream peer-finder's format: the sorted peer keys
	// (FQDNs) joined by "\n", with no trailing newline unless asked for.
	FormatLines Format = "lines"
	// FormatJSON is sink.Document as compact JSON followed by "\n".
	FormatJSON Format = "json"
)

// ParseFormat returns the Format named s; "" means FormatLines.
func ParseFormat(s string) (Format, error) {
	switch Format(s) {
	case "", FormatLines:
		return FormatLines, nil
	case FormatJSON:
		return FormatJSON, nil
	}
	return "", fmt.Errorf("unknown hook format %q (want %q or %q)", s, FormatLines, FormatJSON)
}

// Render returns the bytes a hook reads on stdin for d. With FormatLines
// and trailingNewline false the output is byte-identical to upstream
// peer-finder's; trailingNewline adds the final "\n" that `while read` loops
// need to see the last peer. trailingNewline does not apply to FormatJSON,
// which always ends with "\n". An empty set renders as no bytes in the lines
// format.
func Render(d sink.Delivery, f Format, trailingNewline bool) ([]byte, error) {
	switch f {
	case "", FormatLines:
		return renderLines(d, trailingNewline), nil
	case FormatJSON:
		return sink.MarshalDocument(d)
	}
	return nil, fmt.Errorf("unknown hook format %q", f)
}

func renderLines(d sink.Delivery, trailingNewline bool) []byte {
	peers := d.Set.Peers()
	if len(peers) == 0 {
		return nil
	}
	n := len(peers)
	for i := range peers {
		n += len(peers[i].Key())
	}
	b := make([]byte, 0, n)
	for i := range peers {
		if i > 0 {
			b = append(b, '\n')
		}
		b = append(b, peers[i].Key()...)
	}
	if trailingNewline {
		b = append(b, '\n')
	}
	return b
}
