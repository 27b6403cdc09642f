package health

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/grasp-sync/grasp-sync/internal/clock"
)

func TestTrackerLogsFailuresSparsely(t *testing.T) {
	core, logs := observer.New(zapcore.InfoLevel)
	cfg := DefaultConfig()
	cfg.Jitter = 0
	clock := clock.NewManual(epoch)
	tr, err := New(cfg, clock, prometheus.NewRegistry(), zap.New(core))
	if err != nil {
		t.Fatal(err)
	}
	tr.Track(relayA)
	for i := 0; i < 20; i++ {
		tr.Failed(relayA, errors.New("refused"))
		_, wait := tr.CanAttempt(relayA)
		clock.Advance(wait)
	}
	var counts []int64
	for _, e := range logs.FilterMessage("relay connection failed").All() {
		if e.LoggerName != "health" {
			t.Fatalf("logger name %q, want health", e.LoggerName)
		}
		if e.ContextMap()["relay"] != relayA {
			t.Fatalf("log entry without relay field: %v", e.ContextMap())
		}
		counts = append(counts, e.ContextMap()["failures"].(int64))
	}
	if want := []int64{1, 2, 4, 8, 16}; !slices.Equal(counts, want) {
		t.Fatalf("failure logs at counts %v, want %v", counts, want)
	}
	if n := logs.FilterMessage("relay health changed").Len(); n != 1 {
		t.Fatalf("%d state change logs, want 1 (disconnected -> degraded)", n)
	}

	clock.Advance(24 * time.Hour)
	tr.Tick()
	tr.Tick()
	if n := logs.FilterMessage("relay is dead, retrying once per interval").Len(); n != 1 {
		t.Fatalf("%d dead logs, want 1", n)
	}
	tr.Observe(relayA, SourceNotice, "rate-limited: a")
	tr.Observe(relayA, SourceNotice, "rate-limited: b")
	if n := logs.FilterMessage("relay is rate limiting us, cooling down").Len(); n != 1 {
		t.Fatalf("%d cooldown logs for one cooldown, want 1", n)
	}
}

// A relay failure is logged once, here: reposync logs none of its own.
func TestTrackerLogsADisconnectOnce(t *testing.T) {
	core, logs := observer.New(zapcore.InfoLevel)
	cfg := DefaultConfig()
	cfg.Jitter = 0
	clock := clock.NewManual(epoch)
	tr, err := New(cfg, clock, prometheus.NewRegistry(), zap.New(core))
	if err != nil {
		t.Fatal(err)
	}
	tr.Track(relayA)
	tr.Connected(relayA)
	tr.Failed(relayA, errors.New("connection reset"))
	got := logs.FilterMessage("relay disconnected").All()
	if len(got) != 1 {
		t.Fatalf("%d disconnect logs, want 1", len(got))
	}
	m := got[0].ContextMap()
	if m["relay"] != relayA || m["error"] != "connection reset" || m["retry_in"] == nil {
		t.Errorf("disconnect log lacks relay, error or retry_in: %v", m)
	}
	if n := logs.FilterMessage("relay connection failed").Len(); n != 0 {
		t.Errorf("the disconnect was also logged as a connection failure (%d)", n)
	}
}
