// Package strfry runs real strfry relay processes on 127.0.0.1 for the
// benchmark and the tests that measure against it (the binary's path comes
// from the caller, e.g. GRASP_SYNC_STRFRY), and loads events into them with
// `strfry import`.
package strfry

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/nbd-wtf/go-nostr"
)

// EnvBinary names the environment variable that holds the path of a strfry
// binary; tests that need strfry skip without it.
const EnvBinary = "GRASP_SYNC_STRFRY"

// Settings a relay starts with: strfry's defaults where they matter to a
// sync peer (a REQ returns at most 500 events, NIP-77 on), on loopback, with
// no write policy, a database in its own directory and the file limit left
// as it is (relay.nofiles = 0: a container may refuse to raise it).
const confTemplate = `db = %q
dbParams {
    maxreaders = 256
    mapsize = 10995116277760
}
events {
    maxEventSize = 262144
    rejectEventsNewerThanSeconds = 900
    rejectEventsOlderThanSeconds = 315360000
}
relay {
    bind = "127.0.0.1"
    port = %d
    nofiles = 0
    maxWebsocketPayloadSize = 524288
    maxFilterLimit = 500
    writePolicy {
        plugin = ""
    }
    negentropy {
        enabled = true
        maxSyncEvents = 1000000
    }
}
`

// startTimeout bounds how long a relay takes to accept connections.
const startTimeout = 20 * time.Second

// Relay is one strfry process.
type Relay struct {
	bin, dir, conf string
	port           int
	cmd            *exec.Cmd
	done           chan struct{}
	waitErr        error
	closeOnce      sync.Once
}

// Start runs `strfry relay` with its database and configuration in dir
// (created), on a free port of 127.0.0.1, and returns when it accepts
// connections. Its output goes to dir/relay.log.
func Start(ctx context.Context, bin, dir string) (*Relay, error) {
	if bin == "" {
		return nil, errors.New("strfry: no binary given")
	}
	db := filepath.Join(dir, "db")
	if err := os.MkdirAll(db, 0o755); err != nil {
		return nil, fmt.Errorf("strfry: %w", err)
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	r := &Relay{bin: bin, dir: dir, conf: filepath.Join(dir, "strfry.conf"), port: port, done: make(chan struct{})}
	if err := os.WriteFile(r.conf, fmt.Appendf(nil, confTemplate, db+"/", port), 0o644); err != nil {
		return nil, fmt.Errorf("strfry: %w", err)
	}
	logf, err := os.Create(filepath.Join(dir, "relay.log"))
	if err != nil {
		return nil, fmt.Errorf("strfry: %w", err)
	}
	r.cmd = exec.Command(bin, "--config="+r.conf, "relay")
	r.cmd.Stdout, r.cmd.Stderr = logf, logf
	if err := r.cmd.Start(); err != nil {
		logf.Close()
		return nil, fmt.Errorf("strfry: start %s: %w", bin, err)
	}
	go func() {
		r.waitErr = r.cmd.Wait()
		logf.Close()
		close(r.done)
	}()
	deadline := time.Now().Add(startTimeout)
	for {
		c, err := net.DialTimeout("tcp", r.addr(), 200*time.Millisecond)
		if err == nil {
			c.Close()
			return r, nil
		}
		select {
		case <-r.done:
			return nil, fmt.Errorf("strfry: relay exited before accepting connections (%v); see %s", r.waitErr, filepath.Join(dir, "relay.log"))
		case <-ctx.Done():
			r.Close()
			return nil, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			r.Close()
			return nil, fmt.Errorf("strfry: relay did not accept connections within %s; see %s", startTimeout, filepath.Join(dir, "relay.log"))
		}
	}
}

func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("strfry: find a free port: %w", err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

func (r *Relay) addr() string { return "127.0.0.1:" + strconv.Itoa(r.port) }

// URL is the relay's websocket address.
func (r *Relay) URL() string { return "ws://" + r.addr() }

// Dir is the directory holding the relay's database, configuration and log.
func (r *Relay) Dir() string { return r.dir }

// Command returns a strfry command on this relay's configuration and
// database (e.g. "sync", url, "--dir", "down"), to run while the relay runs
// (LMDB allows several processes).
func (r *Relay) Command(ctx context.Context, args ...string) *exec.Cmd {
	return exec.CommandContext(ctx, r.bin, append([]string{"--config=" + r.conf}, args...)...)
}

// Import loads evs into the relay's database with `strfry import` (which
// checks each event as the relay would).
func (r *Relay) Import(ctx context.Context, evs []*nostr.Event) error {
	var in bytes.Buffer
	enc := json.NewEncoder(&in)
	for _, ev := range evs {
		if err := enc.Encode(ev); err != nil {
			return fmt.Errorf("strfry: import: %w", err)
		}
	}
	cmd := r.Command(ctx, "import")
	cmd.Stdin = &in
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("strfry: import %d events: %w: %s", len(evs), err, lastLines(out, 5))
	}
	return nil
}

// Count returns how many events the relay holds (NIP-45 COUNT over a
// websocket, which strfry answers exactly).
func (r *Relay) Count(ctx context.Context) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	c, err := nostr.RelayConnect(ctx, r.URL())
	if err != nil {
		return 0, fmt.Errorf("strfry: count: %w", err)
	}
	defer c.Close()
	n, _, err := c.Count(ctx, nostr.Filters{{}})
	if err != nil {
		return 0, fmt.Errorf("strfry: count: %w", err)
	}
	return int(n), nil
}

// Len is Count, or -1 when the relay does not answer.
func (r *Relay) Len() int {
	n, err := r.Count(context.Background())
	if err != nil {
		return -1
	}
	return n
}

// Close stops the relay (SIGTERM, then SIGKILL after 5 s) and waits for it.
func (r *Relay) Close() error {
	r.closeOnce.Do(func() {
		if r.cmd.Process == nil {
			return
		}
		_ = r.cmd.Process.Signal(os.Interrupt)
		select {
		case <-r.done:
		case <-time.After(5 * time.Second):
			_ = r.cmd.Process.Kill()
			<-r.done
		}
	})
	return nil
}

func lastLines(b []byte, n int) string {
	lines := bytes.Split(bytes.TrimSpace(b), []byte("\n"))
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return string(bytes.Join(lines, []byte(" | ")))
}
