package health_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/grasp-sync/grasp-sync/internal/health"
	"github.com/grasp-sync/grasp-sync/internal/relay"
)

// TestDialHandshakeStatus: a handshake answered with anything but 101 is a
// *relay.HandshakeError carrying the status, still matches relay.ErrNotWebsocket, and is
// classified by the health tracker from that status.
func TestDialHandshakeStatus(t *testing.T) {
	tests := []struct {
		name     string
		status   int
		wantKind health.FailureKind
	}{
		{"rate limited", http.StatusTooManyRequests, health.FailureRateLimited},
		{"restarting behind a proxy", http.StatusServiceUnavailable, health.FailureTransient},
		{"bad gateway", http.StatusBadGateway, health.FailureTransient},
		{"request timeout", http.StatusRequestTimeout, health.FailureTransient},
		{"no relay at this path", http.StatusNotFound, health.FailureHard},
		{"forbidden", http.StatusForbidden, health.FailureHard},
		{"plain web page", http.StatusOK, health.FailureHard},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.WriteHeader(tt.status)
				io.WriteString(w, "not a relay")
			}))
			defer srv.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			url := "ws" + strings.TrimPrefix(srv.URL, "http")
			c, err := relay.Dial(ctx, url, relay.DefaultOptions())
			if err == nil {
				c.Close()
				t.Fatal("Dial succeeded")
			}
			var hs *relay.HandshakeError
			if !errors.As(err, &hs) {
				t.Fatalf("got %T %v, want *relay.HandshakeError", err, err)
			}
			if got, want := hs.HandshakeStatus(), tt.status; got != want {
				t.Errorf("HandshakeStatus() = %d, want %d", got, want)
			}
			if hs.URL != url {
				t.Errorf("URL = %q, want %q", hs.URL, url)
			}
			if !errors.Is(err, relay.ErrNotWebsocket) {
				t.Errorf("errors.Is(%v, relay.ErrNotWebsocket) = false", err)
			}
			if !strings.Contains(err.Error(), "HTTP "+strconv.Itoa(tt.status)) {
				t.Errorf("error text %q names no status", err)
			}
			if got := health.ClassifyError(err); got != tt.wantKind {
				t.Errorf("health.ClassifyError = %v, want %v", got, tt.wantKind)
			}
		})
	}
}

// TestDialRefusedIsNotHandshakeError: a closed port is a network error,
// not a handshake status, and stays transient.
func TestDialRefusedIsNotHandshakeError(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	url := "ws" + strings.TrimPrefix(srv.URL, "http")
	srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err := relay.Dial(ctx, url, relay.DefaultOptions())
	if err == nil {
		t.Fatal("Dial to a closed port succeeded")
	}
	var hs *relay.HandshakeError
	if errors.As(err, &hs) || errors.Is(err, relay.ErrNotWebsocket) {
		t.Fatalf("closed port reported as a handshake answer: %v", err)
	}
	if got := health.ClassifyError(err); got != health.FailureTransient {
		t.Errorf("health.ClassifyError = %v, want transient", got)
	}
}
