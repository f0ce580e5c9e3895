package dns

import (
	"encoding/binary"
	"errors"
	"hash/fnv"

	"golang.org/x/net/dns/dnsmessage"
)

// fingerprint digests a raw response without allocating: its rcode and TC
// bit and every record of its answer and authority sections (owner, type,
// class and data; not the TTL, which a caching server counts down),
// independent of the records' order, since CoreDNS shuffles them on every
// answer. Equal answers give equal fingerprints; different ones collide with
// probability about 2^-64. The additional section is not digested: glue
// calls glue for each A and AAAA record there with its owner and address
// bytes (valid only during the call), since which glue fits varies between
// answers of 900 or more peers; its CNAME records (aliases of SRV targets)
// are digested, so an alias that changes is noticed though the glue
// addresses are known. ok is false when raw does not parse.
func fingerprint(raw []byte, glue func(owner, addr []byte)) (fp uint64, ok bool) {
	var p dnsmessage.Parser
	h, err := p.Start(raw)
	if err != nil {
		return 0, false
	}
	fp = uint64(h.RCode) + 1
	if h.Truncated {
		fp += 1 << 8
	}
	if err := p.SkipAllQuestions(); err != nil {
		return 0, false
	}
	next := [3]func() (dnsmessage.ResourceHeader, error){p.AnswerHeader, p.AuthorityHeader, p.AdditionalHeader}
	var buf [8]byte
	for section, header := range next {
		for {
			rh, err := header()
			if errors.Is(err, dnsmessage.ErrSectionDone) {
				break
			}
			if err != nil {
				return 0, false
			}
			if rh.Type == dnsmessage.TypeOPT {
				if err := skip(&p, section); err != nil {
					return 0, false
				}
				continue
			}
			if section == 2 && rh.Type != dnsmessage.TypeCNAME { // aliases of targets are digested: see parse
				if err := visitGlue(&p, rh, glue); err != nil {
					return 0, false
				}
				continue
			}
			f := fnv.New64a()
			f.Write([]byte{byte(section)})
			f.Write(rh.Name.Data[:rh.Name.Length])
			binary.BigEndian.PutUint16(buf[:], uint16(rh.Type))
			binary.BigEndian.PutUint16(buf[2:], uint16(rh.Class))
			f.Write(buf[:4])
			switch rh.Type {
			case dnsmessage.TypeSRV:
				r, err := p.SRVResource()
				if err != nil {
					return 0, false
				}
				binary.BigEndian.PutUint16(buf[:], r.Priority)
				binary.BigEndian.PutUint16(buf[2:], r.Weight)
				binary.BigEndian.PutUint16(buf[4:], r.Port)
				f.Write(buf[:6])
				f.Write(r.Target.Data[:r.Target.Length])
			case dnsmessage.TypeA:
				r, err := p.AResource()
				if err != nil {
					return 0, false
				}
				f.Write(r.A[:])
			case dnsmessage.TypeAAAA:
				r, err := p.AAAAResource()
				if err != nil {
					return 0, false
				}
				f.Write(r.AAAA[:])
			default:
				r, err := p.UnknownResource()
				if err != nil {
					return 0, false
				}
				f.Write(r.Data)
			}
			fp += mix(f.Sum64())
		}
	}
	return fp, true
}

// visitGlue hands an additional record to glue when it is an address.
func visitGlue(p *dnsmessage.Parser, rh dnsmessage.ResourceHeader, glue func(owner, addr []byte)) error {
	switch rh.Type {
	case dnsmessage.TypeA:
		r, err := p.AResource()
		if err != nil {
			return err
		}
		glue(rh.Name.Data[:rh.Name.Length], r.A[:])
		return nil
	case dnsmessage.TypeAAAA:
		r, err := p.AAAAResource()
		if err != nil {
			return err
		}
		glue(rh.Name.Data[:rh.Name.Length], r.AAAA[:])
		return nil
	}
	return p.SkipAdditional()
}

// glueAddr encodes one address for a lastAnswer.glue value: its length,
// then its bytes.
func glueAddr(addr []byte) string { return string(append([]byte{byte(len(addr))}, addr...)) }

// hasAddr reports whether addrs, glueAddr encodings one after the other,
// holds addr. It does not allocate.
func hasAddr(addrs string, addr []byte) bool {
	for len(addrs) > 0 {
		n := int(addrs[0])
		if n >= len(addrs) {
			return false
		}
		if addrs[1:1+n] == string(addr) {
			return true
		}
		addrs = addrs[1+n:]
	}
	return false
}

func skip(p *dnsmessage.Parser, section int) error {
	switch section {
	case 0:
		return p.SkipAnswer()
	case 1:
		return p.SkipAuthority()
	}
	return p.SkipAdditional()
}

// mix is splitmix64's finaliser, so that summing the records' hashes
// (order-independent) does not keep FNV's linear structure.
func mix(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	return x ^ x>>31
}
