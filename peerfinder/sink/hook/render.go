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
	// FormatLinesIP is FormatLines with each peer's IPs after its key,
	// space-separated ("web-0.web.ns.svc.cluster.local 10.0.0.5"), for
	// `while read name ip rest` loops; a peer without an IP has its key only.
	FormatLinesIP Format = "lines-ip"
)

// ParseFormat returns the Format named s; "" means FormatLines.
func ParseFormat(s string) (Format, error) {
	switch Format(s) {
	case "", FormatLines:
		return FormatLines, nil
	case FormatJSON:
		return FormatJSON, nil
	case FormatLinesIP:
		return FormatLinesIP, nil
	}
	return "", fmt.Errorf("unknown hook format %q (want %q, %q or %q)", s, FormatLines, FormatLinesIP, FormatJSON)
}

// Render returns the bytes a hook reads on stdin for d. With FormatLines
// and trailingNewline false the output is byte-identical to upstream
// peer-finder's; trailingNewline adds the final "\n" that `while read` loops
// need to see the last peer (in FormatLinesIP too). trailingNewline does not apply to FormatJSON,
// which always ends with "\n". An empty set renders as no bytes in the lines
// format.
func Render(d sink.Delivery, f Format, trailingNewline bool) ([]byte, error) {
	switch f {
	case "", FormatLines:
		return renderLines(d, trailingNewline, false), nil
	case FormatLinesIP:
		return renderLines(d, trailingNewline, true), nil
	case FormatJSON:
		return sink.MarshalDocument(d)
	}
	return nil, fmt.Errorf("unknown hook format %q", f)
}

func renderLines(d sink.Delivery, trailingNewline, ips bool) []byte {
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
		if ips {
			for _, ip := range peers[i].IPs {
				b = append(b, ' ')
				b = append(b, ip...)
			}
		}
	}
	if trailingNewline {
		b = append(b, '\n')
	}
	return b
}
