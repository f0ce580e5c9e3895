// Package jobfile implements the outputs that job frameworks read, beside
// the hosts file: an MPI hostfile ("<name> slots=N" per member, in rank
// order) and the rendezvous environment of torch.distributed (MASTER_ADDR,
// MASTER_PORT, WORLD_SIZE, RANK) and TensorFlow (TF_CONFIG), as a
// shell-sourceable file and as the -- command's environment.
//
// Every member is named as the hosts file names it (hostsfile.Namer and
// hostsfile.MakePlan, so -hosts-name-template, -hosts-index-label,
// -hosts-expect and -ip-family mean the same here), and the members are
// ranked by Order: by role, then index, where a name "<role>-<index>" gives
// both. The decisions (Order, RenderHostfile, TorchEnv, TFConfigOf,
// RenderEnvFile) are pure; File writes what a render function returns,
// atomically.
package jobfile

import (
	"cmp"
	"slices"
	"strconv"
	"strings"

	"github.com/flockd/flock/peerfinder/peer"
	"github.com/flockd/flock/peerfinder/sink/hostsfile"
)

// Member is one name of the job, in rank order.
type Member struct {
	// Name is the host name, as the hosts file writes it.
	Name string
	// Role is Name less its "-<index>" suffix; the whole name when it has
	// none.
	Role string
	// Index is the number after the last '-', -1 when there is none.
	Index int
	// Peer is the peer that has the name, nil for an expected name that
	// has no address yet.
	Peer *peer.Peer
}

// Ranker orders a peer set's names. Its fields are those of the hosts
// file's sink, so both name every member the same.
type Ranker struct {
	Namer    *hostsfile.Namer
	Family   hostsfile.Family
	Expected []string
	// Roles, when not empty, lists the roles ranked, in rank order: members
	// of other roles are left out. Empty ranks every role, by name.
	Roles []string
}

// Order returns the members of set: every name the hosts file gives a
// peer with an address, and every expected name, sorted by role (in
// r.Roles' order, else by name), then index, then name. It is pure.
func (r Ranker) Order(set peer.Set) []Member {
	plan := hostsfile.MakePlan(set, r.Namer, r.Family, r.Expected)
	byName := map[string]*peer.Peer{}
	for _, e := range plan.Entries {
		if _, ok := byName[e.Name]; !ok {
			p, _ := set.Get(e.Peer)
			byName[e.Name] = &p
		}
	}
	for _, name := range plan.Pending {
		byName[name] = nil
	}
	members := make([]Member, 0, len(byName))
	for name, p := range byName {
		role, index := SplitName(name)
		if len(r.Roles) > 0 && !slices.Contains(r.Roles, role) {
			continue
		}
		members = append(members, Member{Name: name, Role: role, Index: index, Peer: p})
	}
	slices.SortFunc(members, func(a, b Member) int {
		return cmp.Or(r.compareRoles(a.Role, b.Role), cmp.Compare(a.Index, b.Index), strings.Compare(a.Name, b.Name))
	})
	return members
}

func (r Ranker) compareRoles(a, b string) int {
	if len(r.Roles) == 0 {
		return strings.Compare(a, b)
	}
	return cmp.Compare(slices.Index(r.Roles, a), slices.Index(r.Roles, b))
}

// SplitName splits "<role>-<index>" into its role and index; a name without
// a numeric suffix is all role, index -1.
func SplitName(name string) (role string, index int) {
	i := strings.LastIndexByte(name, '-')
	if i <= 0 || i == len(name)-1 {
		return name, -1
	}
	n, err := strconv.Atoi(name[i+1:])
	if err != nil || n < 0 || strings.TrimLeft(name[i+1:], "0123456789") != "" {
		return name, -1
	}
	return name[:i], n
}

// Self returns the position of the member whose peer has the key self, -1
// when none has (this member has no name, or its role is not ranked).
func Self(members []Member, self string) int {
	return slices.IndexFunc(members, func(m Member) bool { return m.Peer != nil && m.Peer.Key() == self })
}
