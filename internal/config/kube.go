package config

import "flag"

// Kube holds the flags of the Kubernetes API sources and bootstrap safety.
type Kube struct{}

// addKubeFlags registers the Kubernetes flags on fs.
func (c *Config) addKubeFlags(fs *flag.FlagSet) {}

// completeKube validates the Kubernetes flags.
func (c *Config) completeKube(env Env) error { return nil }
