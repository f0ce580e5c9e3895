package sink

import (
	"encoding/json"
	"fmt"

	"github.com/flockd/flock/peerfinder/peer"
)

// DocumentVersion is the version of the JSON Document. It changes only when
// a field is removed or changes meaning; new fields may be added within a
// version, so readers must ignore fields they do not know.
const DocumentVersion = 1

// Document is the JSON form of a Delivery, shared by every sink that emits
// JSON (hook stdin with -format=json, the JSON file sink). It is level-based:
// it holds the whole set, not what changed, so equal sets give equal bytes
// for equal Self, Generation, Bootstrap and Former.
type Document struct {
	// Version is DocumentVersion.
	Version int `json:"version"`
	// Self is the key (FQDN) of this member.
	Self string `json:"self"`
	// Generation counts the distinct sets published, from 1.
	Generation uint64 `json:"generation"`
	// Bootstrap is "form" or "join" when known, omitted otherwise.
	Bootstrap string `json:"bootstrap,omitempty"`
	// Former is the key (FQDN) of the member that formed the cluster, the
	// one joiners target, when known; omitted otherwise.
	Former string `json:"former,omitempty"`
	// Peers are all members in key order; never null.
	Peers []peer.Peer `json:"peers"`
}

// NewDocument returns the Document for d. Its Peers share memory with d.Set,
// which must therefore not be modified through it.
func NewDocument(d Delivery) Document {
	peers := d.Set.Peers()
	if peers == nil {
		peers = []peer.Peer{}
	}
	return Document{
		Version:    DocumentVersion,
		Self:       d.Self,
		Generation: d.Generation,
		Bootstrap:  d.Bootstrap,
		Former:     d.Former,
		Peers:      peers,
	}
}

// MarshalDocument returns the compact JSON encoding of NewDocument(d),
// followed by a single newline.
func MarshalDocument(d Delivery) ([]byte, error) {
	b, err := json.Marshal(NewDocument(d))
	if err != nil {
		return nil, fmt.Errorf("encode peer document: %w", err)
	}
	return append(b, '\n'), nil
}
