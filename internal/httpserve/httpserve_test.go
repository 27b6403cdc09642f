package httpserve

import (
	"context"
	"errors"
	"io"
	"net/http"
	"testing"
	"time"
)

// TestStartServeShutdown: a server binds port 0, answers, refuses a second
// Start, and a shutdown whose deadline passes while a request hangs calls
// abort, which lets the request end, and returns after the serving
// goroutine.
func TestStartServeShutdown(t *testing.T) {
	release := make(chan struct{})
	s := &Server{Srv: &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/hang" {
			w.WriteHeader(http.StatusOK)
			w.(http.Flusher).Flush()
			<-release
			return
		}
		io.WriteString(w, "ok")
	})}}
	if s.Addr() != "" {
		t.Fatal("address before Start")
	}
	if err := s.Shutdown(context.Background(), nil); err != nil {
		t.Fatalf("shutdown before start: %v", err)
	}
	addr, err := s.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if s.Addr() != addr.String() {
		t.Fatalf("Addr %q, want %q", s.Addr(), addr)
	}
	if _, err := s.Start("127.0.0.1:0"); !errors.Is(err, ErrStarted) {
		t.Fatalf("second Start: %v, want ErrStarted", err)
	}
	resp, err := http.Get("http://" + addr.String() + "/")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(body) != "ok" {
		t.Fatalf("body %q", body)
	}
	hung, err := http.Get("http://" + addr.String() + "/hang")
	if err != nil {
		t.Fatal(err)
	}
	defer hung.Body.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	aborted := false
	err = s.Shutdown(ctx, func() { aborted = true; close(release) })
	if !errors.Is(err, context.DeadlineExceeded) || !aborted {
		t.Fatalf("shutdown with a hanging request: err %v, aborted %v", err, aborted)
	}
}
