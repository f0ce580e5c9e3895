package config

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"

	"github.com/miekg/dns"
)

// ResolvConf is what peer-finder uses from /etc/resolv.conf.
type ResolvConf struct {
	// Servers are the nameservers as host:port.
	Servers []string
	// Search is the search list, in order.
	Search []string
}

// ParseResolvConf parses resolv.conf contents.
func ParseResolvConf(data []byte) (*ResolvConf, error) {
	cc, err := dns.ClientConfigFromReader(bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("parse resolv.conf: %w", err)
	}
	rc := &ResolvConf{Search: cc.Search}
	for _, s := range cc.Servers {
		rc.Servers = append(rc.Servers, net.JoinHostPort(s, cc.Port))
	}
	return rc, nil
}

func readResolvConf(env Env) (*ResolvConf, error) {
	if env.ResolvConf == nil {
		return nil, errors.New("/etc/resolv.conf is not available")
	}
	data, err := env.ResolvConf()
	if err != nil {
		return nil, fmt.Errorf("cannot read /etc/resolv.conf: %w", err)
	}
	return ParseResolvConf(data)
}

// InferDomain finds the cluster domain in the search list, the way the
// kubelet writes it for a pod: "<ns>.svc.<domain> svc.<domain> <domain>".
// It prefers the entry for ns, then any "svc.<domain>" entry, so extra
// search domains (EKS adds "ec2.internal", others add corporate domains) do
// not confuse it. The second result says which entry was used; the error
// says what was found and what to pass instead.
func InferDomain(rc *ResolvConf, ns string) (domain, why string, err error) {
	if rc == nil || len(rc.Search) == 0 {
		return "", "", errors.New("/etc/resolv.conf has no search line to infer the cluster domain from; pass -domain (usually -domain=cluster.local)")
	}
	search := make([]string, len(rc.Search))
	for i, s := range rc.Search {
		search[i] = strings.Trim(strings.ToLower(s), ".")
	}
	prefix := strings.ToLower(ns) + ".svc."
	for _, s := range search {
		if d, ok := strings.CutPrefix(s, prefix); ok && d != "" {
			return d, fmt.Sprintf("resolv.conf search entry %q", s), nil
		}
	}
	for _, s := range search {
		if d, ok := strings.CutPrefix(s, "svc."); ok && d != "" {
			return d, fmt.Sprintf("resolv.conf search entry %q (no entry for namespace %q)", s, ns), nil
		}
	}
	return "", "", fmt.Errorf("no <ns>.svc.<domain> entry in the /etc/resolv.conf search list %v; pass -domain (usually -domain=cluster.local)", search)
}

func splitHostPort(s string) (string, int, error) {
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		return "", 0, fmt.Errorf("want host:port: %w", err)
	}
	n, err := strconv.Atoi(port)
	if err != nil || n <= 0 || n > 65535 || host == "" {
		return "", 0, errors.New("want host:port with a port from 1 to 65535")
	}
	return host, n, nil
}
