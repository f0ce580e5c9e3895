package main

import (
	"slices"
	"testing"
	"time"
)

func TestParseArgs(t *testing.T) {
	tests := []struct {
		args    []string
		cmd     string
		rest    []string
		nodes   int
		delay   time.Duration
		wantErr bool
	}{
		{args: []string{"up"}, cmd: "up", nodes: 4, delay: 500 * time.Millisecond},
		{args: []string{"-nodes=6", "-ready-delay=2s", "up"}, cmd: "up", nodes: 6, delay: 2 * time.Second},
		{args: []string{"exec", "--", "go", "test", "./..."}, cmd: "exec", rest: []string{"go", "test", "./..."}, nodes: 4, delay: 500 * time.Millisecond},
		{args: []string{"exec", "env"}, cmd: "exec", rest: []string{"env"}, nodes: 4, delay: 500 * time.Millisecond},
		{args: []string{"node", "add"}, cmd: "node", rest: []string{"add"}, nodes: 4, delay: 500 * time.Millisecond},
		{args: []string{"node", "kill", "real-3"}, cmd: "node", rest: []string{"kill", "real-3"}, nodes: 4, delay: 500 * time.Millisecond},
		{args: []string{"node", "add", "real-3"}, wantErr: true},
		{args: []string{"node", "stop"}, wantErr: true},
		{args: []string{"node", "remove", "real-3"}, wantErr: true},
		{args: []string{"node"}, wantErr: true},
		{args: []string{"exec"}, wantErr: true},
		{args: []string{"up", "extra"}, wantErr: true},
		{args: []string{"launch"}, wantErr: true},
		{args: nil, wantErr: true},
	}
	for _, tt := range tests {
		c, err := parseArgs(tt.args)
		if (err != nil) != tt.wantErr {
			t.Errorf("parseArgs(%q) error = %v, want error %v", tt.args, err, tt.wantErr)
			continue
		}
		if tt.wantErr {
			continue
		}
		if c.cmd != tt.cmd || !slices.Equal(c.args, tt.rest) || c.opts.Nodes != tt.nodes || c.opts.ReadyDelay != tt.delay {
			t.Errorf("parseArgs(%q) = %q %q nodes=%d delay=%s", tt.args, c.cmd, c.args, c.opts.Nodes, c.opts.ReadyDelay)
		}
	}
}

func TestShellQuote(t *testing.T) {
	tests := map[string]string{
		"/home/u/.state/cluster/admin.kubeconfig": "/home/u/.state/cluster/admin.kubeconfig",
		"127.0.0.1:5353":   "127.0.0.1:5353",
		"/path with space": "'/path with space'",
		"it's":             `'it'\''s'`,
		"":                 "''",
		"$HOME":            "'$HOME'",
	}
	for in, want := range tests {
		if got := shellQuote(in); got != want {
			t.Errorf("shellQuote(%q) = %s, want %s", in, got, want)
		}
	}
}
