// Package httpserve runs an http.Server in the background on a listen
// address: start once, the bound address, a graceful shutdown that waits
// for the serving goroutine.
package httpserve

import (
	"context"
	"errors"
	"net"
	"net/http"
	"sync"
)

// ErrStarted is returned by Start on a server already started.
var ErrStarted = errors.New("already started")

// Server serves Srv on a listener of its own. The zero value with Srv set
// is ready; Start it once.
type Server struct {
	Srv *http.Server
	// OnError, when set, hears the error Serve ended with other than a
	// shutdown (Shutdown returns it too).
	OnError func(error)

	mu       sync.Mutex
	listener net.Listener
	done     chan struct{}
	serveErr error
}

// Start binds addr and serves in the background. It returns the bound
// address (with port 0, the port the system chose).
func (s *Server) Start(addr string) (net.Addr, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.listener != nil {
		return nil, ErrStarted
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err // the caller names its server
	}
	s.listener, s.done = ln, make(chan struct{})
	go func() {
		defer close(s.done)
		err := s.Srv.Serve(ln)
		if errors.Is(err, http.ErrServerClosed) {
			err = nil
		}
		if err != nil && s.OnError != nil {
			s.OnError(err)
		}
		s.mu.Lock()
		s.serveErr = err
		s.mu.Unlock()
	}()
	return ln.Addr(), nil
}

// Addr is the bound address ("" before Start).
func (s *Server) Addr() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.listener == nil {
		return ""
	}
	return s.listener.Addr().String()
}

// Shutdown stops accepting connections and waits for the requests being
// served until ctx is done; then it calls abort (when set: it ends what
// the requests wait for) and closes their connections. It returns once the
// serving goroutine has exited, with the shutdown's error and the one
// Serve ended with. On a server never started it does nothing.
func (s *Server) Shutdown(ctx context.Context, abort func()) error {
	s.mu.Lock()
	done := s.done
	s.mu.Unlock()
	if done == nil {
		return nil
	}
	err := s.Srv.Shutdown(ctx)
	if err != nil {
		if abort != nil {
			abort()
		}
		_ = s.Srv.Close()
	}
	<-done
	s.mu.Lock()
	defer s.mu.Unlock()
	return errors.Join(err, s.serveErr)
}
