package main

import (
	"io"
	"log/slog"
	"slices"
	"testing"
)

func TestParseArgs(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		wantErr bool
		check   func(t *testing.T, c config)
	}{
		{name: "defaults", check: func(t *testing.T, c config) {
			if !slices.Equal(c.manager.AllowedStoragePaths, []string{"/var/lib/flock"}) {
				t.Errorf("AllowedStoragePaths = %q, want /var/lib/flock", c.manager.AllowedStoragePaths)
			}
			if !c.manager.LeaderElection || c.manager.MetricsAddr != ":8443" || !c.manager.MetricsSecure || c.manager.ProbeAddr != ":8081" || c.logFormat != "text" || c.logLevel != slog.LevelInfo {
				t.Errorf("defaults = %+v", c)
			}
		}},
		{name: "out of cluster", args: []string{"-kubeconfig=/k", "--leader-elect=false", "-metrics-bind-address", "0", "-log-format=json", "-log-level=debug"}, check: func(t *testing.T, c config) {
			if c.kubeconfig != "/k" || c.manager.LeaderElection || c.manager.MetricsAddr != "0" || c.logFormat != "json" || c.logLevel != slog.LevelDebug {
				t.Errorf("parsed = %+v", c)
			}
		}},
		{name: "allowed storage paths", args: []string{"-allowed-storage-paths=/mnt/disks, /srv/flock"}, check: func(t *testing.T, c config) {
			if !slices.Equal(c.manager.AllowedStoragePaths, []string{"/mnt/disks", "/srv/flock"}) {
				t.Errorf("AllowedStoragePaths = %q", c.manager.AllowedStoragePaths)
			}
		}},
		{name: "any storage path", args: []string{"-allowed-storage-paths=*"}, check: func(t *testing.T, c config) {
			if c.manager.AllowedStoragePaths != nil {
				t.Errorf("AllowedStoragePaths = %q, want nil (any)", c.manager.AllowedStoragePaths)
			}
		}},
		{name: "relative storage path", args: []string{"-allowed-storage-paths=data"}, wantErr: true},
		{name: "unclean storage path", args: []string{"-allowed-storage-paths=/var/lib/../etc"}, wantErr: true},
		{name: "root storage path", args: []string{"-allowed-storage-paths=/"}, wantErr: true},
		{name: "empty storage path", args: []string{"-allowed-storage-paths="}, wantErr: true},
		{name: "bad log format", args: []string{"-log-format=xml"}, wantErr: true},
		{name: "bad log level", args: []string{"-log-level=loud"}, wantErr: true},
		{name: "stray argument", args: []string{"extra"}, wantErr: true},
		{name: "unknown flag", args: []string{"-nope"}, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := parseArgs(tt.args, io.Discard)
			if (err != nil) != tt.wantErr {
				t.Fatalf("parseArgs(%q) error = %v, want error %v", tt.args, err, tt.wantErr)
			}
			if tt.check != nil {
				tt.check(t, c)
			}
		})
	}
}
