// Command rssfloor is a measuring stick, not a peer finder: the smallest
// program that does what peer-finder's endpointslice source does at start
// with the same standard and non-Kubernetes libraries (net/http with TLS
// and HTTP/2, encoding/json, log/slog, text/template/parse, miekg/dns,
// Prometheus' client_golang with the Go and process collectors), but
// without client-go, apimachinery and k8s.io/api: one streaming list of a
// namespace's EndpointSlices (a watch with sendInitialEvents) decoded into
// a slim struct, one hook run with the ready endpoints, then idle. Its RSS
// is the floor that peer-finder's Kubernetes libraries add to (see
// bench/README.md). Build with -tags noprom to leave client_golang out.
//
//	CGO_ENABLED=0 go build -trimpath -ldflags='-s -w' -o /tmp/rssfloor ./bench/rssfloor
//	/tmp/rssfloor -server https://127.0.0.1:6443 -ca ca.pem -cert cert.pem -key key.pem -ns fp-xxxxx -hook ./hook.sh
package main

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"text/template/parse"

	"github.com/miekg/dns"
)

type slice struct {
	Metadata struct {
		Name string `json:"name"`
	} `json:"metadata"`
	Endpoints []struct {
		Hostname   string `json:"hostname"`
		Conditions struct {
			Ready *bool `json:"ready"`
		} `json:"conditions"`
	} `json:"endpoints"`
}

type event struct {
	Type   string `json:"type"`
	Object slice  `json:"object"`
}

func main() {
	server := flag.String("server", "", "API server URL")
	ca := flag.String("ca", "", "CA certificate file")
	cert := flag.String("cert", "", "client certificate file")
	key := flag.String("key", "", "client key file")
	ns := flag.String("ns", "", "namespace")
	service := flag.String("service", "fp", "service")
	hook := flag.String("hook", "", "command run once with the ready peers on stdin")
	flag.Parse()
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	if err := run(log, *server, *ca, *cert, *key, *ns, *service, *hook); err != nil {
		fmt.Fprintln(os.Stderr, "rssfloor:", err)
		os.Exit(1)
	}
	select {}
}

func run(log *slog.Logger, server, caFile, certFile, keyFile, ns, service, hook string) error {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	go func() { _ = http.Serve(l, metricsHandler()) }()
	// What peer-finder parses and builds at start besides the list.
	if _, err := parse.Parse("name", "{{.Name}}-{{.Index}}", "{{", "}}"); err != nil {
		return err
	}
	m := new(dns.Msg)
	m.SetQuestion(dns.Fqdn(service+"."+ns+".svc.cluster.local"), dns.TypeSRV)
	if _, err := m.Pack(); err != nil {
		return err
	}

	ca, err := os.ReadFile(caFile)
	if err != nil {
		return err
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca)
	c, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return err
	}
	hc := &http.Client{Transport: &http.Transport{
		TLSClientConfig:   &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{c}},
		ForceAttemptHTTP2: true,
	}}
	q := url.Values{"watch": {"1"}, "sendInitialEvents": {"true"}, "allowWatchBookmarks": {"true"},
		"resourceVersionMatch": {"NotOlderThan"}, "labelSelector": {"kubernetes.io/service-name=" + service}}
	resp, err := hc.Get(server + "/apis/discovery.k8s.io/v1/namespaces/" + ns + "/endpointslices?" + q.Encode())
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("list: %s", resp.Status)
	}
	dec := json.NewDecoder(resp.Body)
	slices := map[string]slice{}
	for {
		var e event
		if err := dec.Decode(&e); err != nil {
			return err
		}
		if e.Type == "BOOKMARK" {
			break
		}
		slices[e.Object.Metadata.Name] = e.Object
	}
	var peers []string
	for _, s := range slices {
		for _, ep := range s.Endpoints {
			if ep.Conditions.Ready != nil && *ep.Conditions.Ready {
				peers = append(peers, ep.Hostname+"."+service+"."+ns+".svc.cluster.local")
			}
		}
	}
	if hook != "" {
		cmd := exec.Command(hook)
		cmd.Stdin = strings.NewReader(strings.Join(peers, "\n") + "\n")
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("hook: %w", err)
		}
	}
	log.Info("peers delivered", "peers", len(peers))
	go func() { // keep the watch open, as a finder does
		for {
			var e event
			if dec.Decode(&e) != nil {
				return
			}
		}
	}()
	return nil
}
