package config

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/miekg/dns"
)

// ResolvConf is what peer-finder uses from /etc/resolv.conf.
type ResolvConf struct {
	// Servers are the nameservers as host:port.
	Servers []string
	// Search is the search list, in order.
	Search []string
	// Timeout and Attempts are the options timeout: and attempts: when the
	// file sets them, else 0.
	Timeout  time.Duration
	Attempts int
}

// maxLine is the longest line bufio.Scanner (and so miekg/dns) reads.
const maxLine = bufio.MaxScanTokenSize

// ParseResolvConf parses resolv.conf contents. A nameserver that is not an
// IP address, or a line too long to read, is an error.
func ParseResolvConf(data []byte) (*ResolvConf, error) {
	var opts struct{ timeout, attempts bool }
	for i, line := range bytes.Split(data, []byte("\n")) {
		if len(line) >= maxLine {
			return nil, fmt.Errorf("parse resolv.conf: line %d is longer than 64 KiB", i+1)
		}
		if f := bytes.Fields(line); len(f) > 0 && string(f[0]) == "options" {
			for _, o := range f[1:] {
				opts.timeout = opts.timeout || bytes.HasPrefix(o, []byte("timeout:"))
				opts.attempts = opts.attempts || bytes.HasPrefix(o, []byte("attempts:"))
			}
		}
	}
	cc, err := dns.ClientConfigFromReader(bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("parse resolv.conf: %w", err)
	}
	rc := &ResolvConf{Search: cc.Search}
	if opts.timeout && cc.Timeout > 0 {
		rc.Timeout = time.Duration(cc.Timeout) * time.Second
	}
	if opts.attempts && cc.Attempts > 0 {
		rc.Attempts = cc.Attempts
	}
	for _, s := range cc.Servers {
		if net.ParseIP(s) == nil {
			return nil, fmt.Errorf("parse resolv.conf: nameserver %q is not an IP address", s)
		}
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
			if err := validDomain(d); err != nil {
				return "", "", fmt.Errorf("resolv.conf search entry %q: %w; pass -domain", s, err)
			}
			return d, fmt.Sprintf("resolv.conf search entry %q", s), nil
		}
	}
	for _, s := range search {
		if d, ok := strings.CutPrefix(s, "svc."); ok && d != "" {
			if err := validDomain(d); err != nil {
				return "", "", fmt.Errorf("resolv.conf search entry %q: %w; pass -domain", s, err)
			}
			return d, fmt.Sprintf("resolv.conf search entry %q (no entry for namespace %q)", s, ns), nil
		}
	}
	return "", "", fmt.Errorf("no <ns>.svc.<domain> entry in the /etc/resolv.conf search list %v; pass -domain (usually -domain=cluster.local)", search)
}

// splitHostPortZero is splitHostPort for listen addresses: the host may be
// empty and the port 0 (any free port).
func splitHostPortZero(s string) (string, int, error) {
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		return "", 0, fmt.Errorf("want [host]:port: %w", err)
	}
	n, err := strconv.Atoi(port)
	if err != nil || n < 0 || n > 65535 {
		return "", 0, errors.New("want [host]:port with a port from 0 to 65535")
	}
	return host, n, nil
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
