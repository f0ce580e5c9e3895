package events

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

func TestOf(t *testing.T) {
	tests := []struct {
		msg        string
		attrs      map[string]string
		first      bool
		wantReason string // "" for no Event
		wantType   string
		wantNote   []string
	}{
		{msg: msgDelivered, attrs: map[string]string{"peers": "3", "generation": "1", "role": "form"}, first: true,
			wantReason: "PeersDelivered", wantType: "Normal", wantNote: []string{"3 peers", "role form"}},
		{msg: msgDelivered, attrs: map[string]string{"peers": "4", "generation": "2"}, first: false},
		{msg: msgRole, attrs: map[string]string{"role": "join", "reason": "formed-by-other", "detail": "the cluster was formed by pod db-0"},
			wantReason: "BootstrapRole", wantType: "Normal", wantNote: []string{"join (formed-by-other)", "formed by pod db-0"}},
		{msg: msgSinkFailing, attrs: map[string]string{"sink": "hook", "err": "exit status 1"},
			wantReason: "SinkFailing", wantType: "Warning", wantNote: []string{"hook failing", "exit status 1"}},
		{msg: msgSinkRecovered, attrs: map[string]string{"sink": "hook"}, wantReason: "SinkRecovered", wantType: "Normal", wantNote: []string{"hook recovered"}},
		{msg: msgTimeout, attrs: map[string]string{"err": "bootstrap timeout: no peer set was delivered in time"},
			wantReason: "BootstrapTimeout", wantType: "Warning", wantNote: []string{"bootstrap timeout"}},
		{msg: msgForbidden, attrs: map[string]string{"verb": "list", "resource": "endpointslices", "namespace": "db", "needs": "list,watch", "fix": "kubectl ..."},
			wantReason: "Forbidden", wantType: "Warning", wantNote: []string{"list endpointslices in namespace db", "grant list,watch"}},
		{msg: msgOwnPod, attrs: map[string]string{"forbidden": "true", "err": "pods \"db-0\" is forbidden"},
			wantReason: "Forbidden", wantType: "Warning", wantNote: []string{"is forbidden"}},
		{msg: msgOwnPod, attrs: map[string]string{"forbidden": "false", "err": "connection refused"}},
		{msg: "starting", attrs: map[string]string{}},
	}
	for i, tt := range tests {
		t.Run(strconv.Itoa(i)+" "+tt.msg, func(t *testing.T) {
			e, ok := Of(tt.msg, tt.attrs, tt.first)
			if ok != (tt.wantReason != "") || e.Reason != tt.wantReason || e.Type != tt.wantType {
				t.Fatalf("Of() = %+v, %v; want reason %q type %q", e, ok, tt.wantReason, tt.wantType)
			}
			for _, w := range tt.wantNote {
				if !strings.Contains(e.Note, w) {
					t.Errorf("note %q lacks %q", e.Note, w)
				}
			}
			if ok && e.Action == "" {
				t.Errorf("no action")
			}
		})
	}
}

// TestMessagesAreLogged checks that each message Of maps is still logged,
// as a string literal, by some component: renaming a log message must not
// silently end its Event.
func TestMessagesAreLogged(t *testing.T) {
	var src strings.Builder
	for _, dir := range []string{"..", "../../internal/kube"} {
		err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() && d.Name() == "events" {
				return filepath.SkipDir
			}
			if !d.IsDir() && strings.HasSuffix(path, ".go") && !strings.HasSuffix(path, "_test.go") {
				b, err := os.ReadFile(path)
				if err != nil {
					return err
				}
				src.Write(b)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	for _, m := range []string{msgDelivered, msgRole, msgSinkFailing, msgSinkRecovered, msgTimeout, msgForbidden, msgOwnPod} {
		if !strings.Contains(src.String(), strconv.Quote(m)) {
			t.Errorf("no component logs %q any more; update the Events mapping", m)
		}
	}
}

func TestHandlerPostsAndPassesThrough(t *testing.T) {
	r := &Recorder{log: slog.New(slog.DiscardHandler), queue: make(chan Event, 10)}
	var out bytes.Buffer
	log := slog.New(r.Handler(slog.NewTextHandler(&out, nil))).With("component", "engine")
	log.Info("starting")
	log.Info(msgDelivered, "generation", 1, "peers", 3, "role", "form")
	log.Info(msgDelivered, "generation", 2, "peers", 4, "role", "form")
	log.Warn(msgSinkFailing, "sink", "hook", "err", "exit status 1")
	log.Debug(msgSinkRecovered, "sink", "hook") // below Info: no Event, not shown
	close(r.queue)
	var reasons []string
	for e := range r.queue {
		reasons = append(reasons, e.Reason)
	}
	if got := strings.Join(reasons, ","); got != "PeersDelivered,SinkFailing" {
		t.Errorf("events %s, want PeersDelivered,SinkFailing (the first delivery only)", got)
	}
	if n := strings.Count(out.String(), "\n"); n != 4 || !strings.Contains(out.String(), "component=engine") {
		t.Errorf("next handler got %d lines, want 4 with the logger's attrs:\n%s", n, out.String())
	}
}
