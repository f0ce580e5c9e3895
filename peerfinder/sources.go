package peerfinder

import (
	"fmt"
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/flockd/flock/peerfinder/config"
	"github.com/flockd/flock/peerfinder/engine"
	"github.com/flockd/flock/peerfinder/events"
	dnssource "github.com/flockd/flock/peerfinder/source/dns"
	"github.com/flockd/flock/peerfinder/source/endpointslice"
	"github.com/flockd/flock/peerfinder/source/pods"
	"github.com/flockd/flock/peerfinder/source/static"
)

// buildSources creates the sources the command line asks for, in the order
// of -source. The engine publishes the union by FQDN of their latest
// snapshots once every one of them has reported. A forbidden Kubernetes
// source is a Forbidden Event on em (nil: none).
func buildSources(cfg *config.Config, log *slog.Logger, reg prometheus.Registerer, kc *kubeClient, em events.Emitter) ([]engine.NamedSource, error) {
	var out []engine.NamedSource
	for _, name := range cfg.Kube.Sources {
		l := log.With("source", name)
		switch name {
		case config.SourceDNS:
			src, err := dnssource.New(dnssource.Config{
				Name:     cfg.ServiceFQDN(),
				Servers:  cfg.DNSServers,
				Period:   cfg.PollPeriod,
				Timeout:  cfg.DNSTimeout,
				Attempts: cfg.DNSAttempts,
				Logger:   l,
				Metrics:  dnssource.NewMetrics(reg),
			})
			if err != nil {
				return nil, err
			}
			out = append(out, engine.NamedSource{Name: name, Source: src})
		case config.SourceEndpointSlice:
			client, err := kc.Get()
			if err != nil {
				return nil, err
			}
			src, err := endpointslice.New(endpointslice.Config{
				Client: client,
				Options: endpointslice.Options{
					Service: cfg.Service, Namespace: cfg.Namespace, Domain: cfg.Domain,
					IncludeNotReady: cfg.Kube.IncludeNotReady,
				},
				Logger:      l,
				Metrics:     kc.Metrics(reg),
				OnForbidden: forbiddenEvents(em),
			})
			if err != nil {
				return nil, err
			}
			out = append(out, engine.NamedSource{Name: name, Source: src})
		case config.SourcePods:
			client, err := kc.Get()
			if err != nil {
				return nil, err
			}
			src, err := pods.New(pods.Config{
				Client: client,
				Options: pods.Options{
					Service: cfg.Service, Namespace: cfg.Namespace, Domain: cfg.Domain,
					IncludeNotReady: cfg.Kube.IncludeNotReady,
				},
				Selector:         cfg.Kube.Selector,
				SelectorFromSelf: cfg.Kube.SelectorFromSelf,
				SelfPod:          cfg.Bootstrap.PodName,
				Logger:           l,
				Metrics:          kc.Metrics(reg),
				OnForbidden:      forbiddenEvents(em),
			})
			if err != nil {
				return nil, err
			}
			out = append(out, engine.NamedSource{Name: name, Source: src})
		case config.SourceStatic:
			src := static.Source{File: cfg.Kube.StaticFile, Service: cfg.ServiceFQDN(), Period: cfg.PollPeriod, Logger: l}
			out = append(out, engine.NamedSource{Name: name, Source: src})
		default:
			return nil, fmt.Errorf("unknown source %q", name)
		}
	}
	return out, nil
}
