package localcluster

import (
	"context"
	"net"
	"path/filepath"
	"sync/atomic"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// initializingCRI answers Version as containerd does while its CRI plugin
// initializes, until ready is set.
type initializingCRI struct {
	runtimeapi.UnimplementedRuntimeServiceServer
	ready atomic.Bool
}

func (c *initializingCRI) Version(context.Context, *runtimeapi.VersionRequest) (*runtimeapi.VersionResponse, error) {
	if !c.ready.Load() {
		return nil, status.Error(codes.Unknown, "server is not initialized yet")
	}
	return &runtimeapi.VersionResponse{RuntimeName: "containerd"}, nil
}

// TestCRIReady: a node's containerd counts as started only once its CRI
// answers, not when its socket does (a kubelet started before exits:
// "validate CRI v1 runtime API ... server is not initialized yet", seen
// after a node kill in a campaign).
func TestCRIReady(t *testing.T) {
	socket := filepath.Join(t.TempDir(), "containerd.sock")
	ln, err := net.Listen("unix", socket)
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	cri := &initializingCRI{}
	runtimeapi.RegisterRuntimeServiceServer(srv, cri)
	go srv.Serve(ln)
	t.Cleanup(srv.Stop)

	if err := criReady(t.Context(), socket); status.Code(err) != codes.Unknown {
		t.Fatalf("while initializing: %v; want the CRI's error", err)
	}
	cri.ready.Store(true)
	if err := criReady(t.Context(), socket); err != nil {
		t.Fatalf("initialized: %v", err)
	}
	if err := criReady(t.Context(), filepath.Join(t.TempDir(), "none.sock")); err == nil {
		t.Fatal("no socket: no error")
	}
}
