// Package syncbuf has a bytes.Buffer that is safe for concurrent use, for
// tests that collect the output of processes, loggers and goroutines while
// they run.
package syncbuf

import (
	"bytes"
	"sync"
)

// Buffer is an io.Writer whose contents may be read while other goroutines
// write to it. The zero value is an empty buffer ready to use.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write appends p to the buffer.
func (s *Buffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// String returns everything written so far.
func (s *Buffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
