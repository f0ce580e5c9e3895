package config

import "flag"

// Sinks holds the flags of the file and exec sinks.
type Sinks struct{}

// addSinkFlags registers the sink flags on fs.
func (c *Config) addSinkFlags(fs *flag.FlagSet) {}

// completeSinks validates the sink flags.
func (c *Config) completeSinks(env Env) error { return nil }
