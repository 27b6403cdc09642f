package main

import (
	"net/http"
	"testing"

	"github.com/coder/websocket"
)

// serveSilentWebSocket accepts a WebSocket and reads (and ignores) every
// message until the client goes away.
func serveSilentWebSocket(t *testing.T, w http.ResponseWriter, r *http.Request) {
	c, err := websocket.Accept(w, r, nil)
	if err != nil {
		t.Errorf("accept: %v", err)
		return
	}
	defer c.CloseNow()
	for {
		if _, _, err := c.Read(r.Context()); err != nil {
			return
		}
	}
}
