package health

import (
	"context"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	ws "github.com/coder/websocket"

	"github.com/grasp-sync/grasp-sync/internal/relay"
)

// dialWS dials like the relay package does and, as connection code should,
// turns a handshake answered with a status other than 101 into a
// HandshakeError.
func dialWS(t *testing.T, url string) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, resp, err := ws.Dial(ctx, url, nil)
	if err == nil {
		c.CloseNow()
		return nil
	}
	if resp != nil && resp.StatusCode != http.StatusSwitchingProtocols {
		return fmt.Errorf("dial %s: %w", url, &relay.HandshakeError{URL: url, StatusCode: resp.StatusCode})
	}
	return fmt.Errorf("dial %s: %w", url, err)
}

// quietTLSServer is an httptest TLS server with a certificate no client
// trusts, which does not log the handshake errors this causes.
func quietTLSServer() *httptest.Server {
	srv := httptest.NewUnstartedServer(http.NotFoundHandler())
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	srv.StartTLS()
	return srv
}

// TestClassifyErrorRealDials classifies errors produced by real dials on
// loopback: untrusted TLS, TLS against plain HTTP, refused connections and
// HTTP servers that are not websocket endpoints.
func TestClassifyErrorRealDials(t *testing.T) {
	tlsSrv := quietTLSServer()
	defer tlsSrv.Close()
	plainSrv := httptest.NewServer(http.NotFoundHandler())
	defer plainSrv.Close()
	status := func(code int) string {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			w.WriteHeader(code)
		}))
		t.Cleanup(srv.Close)
		return "ws" + strings.TrimPrefix(srv.URL, "http")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closedAddr := ln.Addr().String()
	ln.Close()

	for _, tc := range []struct {
		name string
		url  string
		want FailureKind
	}{
		{"untrusted certificate", "wss" + strings.TrimPrefix(tlsSrv.URL, "https"), FailureHard},
		// net/http replaces the tls.RecordHeaderError with an untyped
		// "server gave HTTP response to HTTPS client" error; we do not match
		// Go error strings, so this one only backs off (capped at 1 h).
		{"tls to plain http", "wss" + strings.TrimPrefix(plainSrv.URL, "http"), FailureTransient},
		{"plain http page", status(http.StatusOK), FailureHard},
		{"not found", status(http.StatusNotFound), FailureHard},
		{"too many requests", status(http.StatusTooManyRequests), FailureRateLimited},
		{"service unavailable", status(http.StatusServiceUnavailable), FailureTransient},
		{"connection refused", "ws://" + closedAddr, FailureTransient},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := dialWS(t, tc.url)
			if err == nil {
				t.Fatal("dial succeeded")
			}
			if got := ClassifyError(err); got != tc.want {
				t.Fatalf("ClassifyError(%v) = %s, want %s", err, got, tc.want)
			}
		})
	}
}

// TestTrackerRealDialFailures feeds real dial errors to the Tracker.
func TestTrackerRealDialFailures(t *testing.T) {
	tlsSrv := quietTLSServer()
	defer tlsSrv.Close()
	url := "wss" + strings.TrimPrefix(tlsSrv.URL, "https")
	tr, _, _ := newTestTracker(t, nil)
	tr.Track(url)
	tr.AttemptStarted(url)
	err := dialWS(t, url)
	if err == nil {
		t.Fatal("dial succeeded")
	}
	tr.Failed(url, err)
	wantAttempt(t, tr, url, false, 12*time.Hour)
	if h := tr.Snapshot()[0]; h.NaughtyUntil.IsZero() || h.LastError != err.Error() {
		t.Fatalf("snapshot = %+v", h)
	}
}
