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

// Closing a connection to a relay that never reads (so never answers the
// close frame) ends the read loop's wait at once: it does not sit out the
// websocket's close-handshake timeout (5 s) with the caller of Close
// blocked. Several rounds, as which of Close and the read's cancellation
// gets to the websocket first varies.
func TestCloseDoesNotWaitForASilentRelay(t *testing.T) {
	done := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		conn, err := ws.Accept(w, r, nil)
		if err != nil {
			return
		}
		defer conn.CloseNow()
		<-done
	}))
	defer srv.Close()
	defer close(done)
	url := "ws" + strings.TrimPrefix(srv.URL, "http")
	for round := range 5 {
		c, err := Dial(context.Background(), url, DefaultOptions())
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(50 * time.Millisecond) // the read loop waits in a read
		start := time.Now()
		_ = c.Close()
		// The websocket's handshake wait is 5 s; a close that ends the
		// read takes milliseconds even on a loaded machine.
		if d := time.Since(start); d > 3*time.Second {
			t.Fatalf("round %d: Close took %s: the read loop waited for the close handshake", round, d)
		}
	}
}
