package relay

import (
	"context"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/nbd-wtf/go-nostr"

	"github.com/grasp-sync/grasp-sync/testkit/harness"
)

// TestDialRequiresBounds: Dial applies no defaults of its own; a missing
// bound is refused before any connection, naming the field.
func TestDialRequiresBounds(t *testing.T) {
	for _, tc := range []struct {
		field string
		clear func(*Options)
	}{
		{"MaxMessageBytes", func(o *Options) { o.MaxMessageBytes = 0 }},
		{"WriteTimeout", func(o *Options) { o.WriteTimeout = 0 }},
		{"PingInterval", func(o *Options) { o.PingInterval = 0 }},
		{"PongTimeout", func(o *Options) { o.PongTimeout = 0 }},
		{"SubscriptionBuffer", func(o *Options) { o.SubscriptionBuffer = 0 }},
	} {
		opts := DefaultOptions()
		tc.clear(&opts)
		_, err := Dial(context.Background(), "ws://127.0.0.1:1", opts)
		if err == nil || !strings.Contains(err.Error(), tc.field) {
			t.Errorf("zero %s: Dial error %v, want one naming the field", tc.field, err)
		}
	}
}

// Dial gives the connection's socket Options.ReadPause once the handshake
// is done (the handshake itself is not paced), and refuses a pause
// outside 0–MaxReadPause.
func TestDialSetsReadPause(t *testing.T) {
	url := harness.StartKhatru(t, nil, nil)
	opts := DefaultOptions()
	opts.ReadPause = 7 * time.Millisecond
	c := dial(t, url, opts)
	if c.cork == nil || c.cork.pause != 7*time.Millisecond {
		t.Fatalf("socket's read pause not set from Options.ReadPause (cork %v)", c.cork)
	}
	if runtime.GOOS == "linux" && (c.cork.lowWater == nil || c.cork.lowMark < minPauseLowWater) {
		t.Fatal("no low-water mark setter for the dialled TCP socket: a pause would leave arrivals waking the process")
	}
	sk := nostr.GeneratePrivateKey()
	if r := c.PublishWait(context.Background(), signed(t, sk, 1621, "paced", nil)); r.Err != nil || !r.OK {
		t.Fatalf("publish over a paced connection: %+v", r)
	}
	for _, d := range []time.Duration{-time.Millisecond, MaxReadPause + time.Millisecond} {
		opts.ReadPause = d
		if _, err := Dial(context.Background(), url, opts); err == nil || !strings.Contains(err.Error(), "ReadPause") {
			t.Errorf("ReadPause %v: Dial error %v, want one naming the field", d, err)
		}
	}
}
