package harness

import (
	"fmt"
	"io"
	"log"
	"net/http/httptest"
	"strings"
	"syscall"
	"testing"

	"github.com/fiatjaf/khatru"
)

// StartKhatru serves a plain khatru relay on 127.0.0.1 until the test ends
// and returns its ws:// URL. Unlike StartRelay there is no proxy: NIP-77,
// AUTH and every hook are khatru's own, for tests of how the code meets
// khatru itself. Events are kept in store (a new Store when nil); setup, when
// not nil, then adjusts the relay (Negentropy, policies, other hooks).
func StartKhatru(tb testing.TB, store *Store, setup func(*khatru.Relay)) string {
	tb.Helper()
	if store == nil {
		store = NewStore()
	}
	rl := khatru.NewRelay()
	rl.Log = log.New(io.Discard, "", 0)
	rl.StoreEvent = append(rl.StoreEvent, store.SaveEvent)
	rl.ReplaceEvent = append(rl.ReplaceEvent, store.ReplaceEvent)
	rl.DeleteEvent = append(rl.DeleteEvent, store.DeleteEvent)
	rl.QueryEvents = append(rl.QueryEvents, store.QueryEvents)
	rl.CountEvents = append(rl.CountEvents, store.CountEvents)
	if setup != nil {
		setup(rl)
	}
	srv := httptest.NewServer(rl)
	tb.Cleanup(srv.Close)
	return "ws" + strings.TrimPrefix(srv.URL, "http")
}

// Start is StartRelay for tests: it fails the test when the relay does not
// start and closes the relay when the test ends.
func Start(tb testing.TB, opts RelayOptions) *Relay {
	tb.Helper()
	r, err := StartRelay(opts)
	if err != nil {
		tb.Fatalf("harness: StartRelay: %v", err)
	}
	tb.Cleanup(func() { r.Close() })
	return r
}

// ClosedPort returns the ws:// URL of a port on 127.0.0.1 that refuses
// connections until the test ends and that no relay started meanwhile can
// take: a socket is bound to it and never listens.
func ClosedPort(tb testing.TB) string {
	tb.Helper()
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM, 0)
	if err != nil {
		tb.Fatalf("harness: socket: %v", err)
	}
	tb.Cleanup(func() { syscall.Close(fd) })
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		tb.Fatalf("harness: bind: %v", err)
	}
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		tb.Fatalf("harness: getsockname: %v", err)
	}
	return fmt.Sprintf("ws://127.0.0.1:%d", sa.(*syscall.SockaddrInet4).Port)
}
