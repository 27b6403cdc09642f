package relay

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	ws "github.com/coder/websocket"
)

// TestTrickledMessageIsDropped: a relay that sends one message in
// fragments, slowly, while still answering pings, loses the connection
// once the message is not complete within PongTimeout.
func TestTrickledMessageIsDropped(t *testing.T) {
	stop := make(chan struct{})
	defer close(stop)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		conn, err := ws.Accept(w, r, &ws.AcceptOptions{CompressionMode: ws.CompressionDisabled})
		if err != nil {
			return
		}
		defer conn.CloseNow()
		ctx := conn.CloseRead(context.Background()) // answers pings
		wr, err := conn.Writer(ctx, ws.MessageText)
		if err != nil {
			return
		}
		wr.Write([]byte(`["NOTICE","`))
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-ctx.Done():
				return
			case <-tick.C:
				// Each write with a full buffer goes out as a frame.
				if _, err := wr.Write([]byte(strings.Repeat("a", 5000))); err != nil {
					return
				}
			}
		}
	}))
	defer srv.Close()
	opts := DefaultOptions()
	opts.PingInterval = 50 * time.Millisecond
	opts.PongTimeout = 300 * time.Millisecond
	opts.MaxMessageBytes = 64 << 20
	c := dial(t, "ws"+strings.TrimPrefix(srv.URL, "http"), opts)
	select {
	case <-c.Done():
		if err := c.Err(); err == nil || !strings.Contains(err.Error(), "not complete") {
			t.Fatalf("connection ended with %v, want the message deadline", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a trickling relay kept the connection for 5 s with a 300 ms message deadline")
	}
}
