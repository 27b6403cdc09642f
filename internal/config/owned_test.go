package config

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/grasp-sync/grasp-sync/internal/health"
	"github.com/grasp-sync/grasp-sync/internal/publish"
)

// An engine's settings errors come out with the section's path on the
// field and on the setting it is compared with, and still match the
// engine's own sentinel.
func TestEngineErrorsAreQualified(t *testing.T) {
	c := validDefault()
	c.Health.BackoffMax = time.Second
	c.Publisher.RetryMax = time.Millisecond
	err := c.Validate()
	want := `health.backoff_max: must be >= health.backoff_base (5s), got "1s"` + "\n" +
		`publisher.retry_max: must be >= publisher.retry_base (1s), got "1ms"`
	if got := fmt.Sprint(err); got != want {
		t.Fatalf("got %q\nwant %q", got, want)
	}
	if !errors.Is(err, ErrInvalid) || !errors.Is(err, health.ErrInvalidConfig) || !errors.Is(err, publish.ErrInvalidConfig) {
		t.Fatal("errors.Is does not match ErrInvalid and the engines' sentinels")
	}
}

// Keys of a struct inlined in a section belong to that section: the limits
// section mixes the handler's, the sync engine's and the local index's, in
// declaration order.
func TestInlineSettingsJoinTheirSection(t *testing.T) {
	var keys []string
	for _, s := range Settings() {
		if s.Group == "limits" {
			keys = append(keys, s.Key)
		}
	}
	want := "[limits.max_event_bytes limits.max_event_tags limits.max_relays_per_announcement limits.max_tracked_relays limits.max_repositories limits.relay_event_rate limits.relay_queue limits.relay_queue_bytes limits.max_local_index_events]"
	if got := fmt.Sprint(keys); got != want {
		t.Fatalf("limits keys %s\nwant %s", got, want)
	}
	for _, sec := range Sections() {
		if sec.Key == "" || sec.Help == "" {
			t.Errorf("section %+v: an inline struct became a section", sec)
		}
	}
	c := Default()
	s, ok := Lookup("limits.relay_event_rate")
	if !ok {
		t.Fatal("limits.relay_event_rate not found")
	}
	if err := s.SetString(c, "7"); err != nil || c.Limits.RelayRate != 7 {
		t.Fatalf("SetString through an inline struct: %v, %d", err, c.Limits.RelayRate)
	}
}

// The sync engine's settings (sync, negentropy, trusted, its limits) are
// checked by their packages and qualified with their sections.
func TestSyncEngineErrorsAreQualified(t *testing.T) {
	c := validDefault()
	c.Sync.HistoricRetryMax = time.Second
	c.Negentropy.ClaimWait = 0
	c.Trusted.Interval = 0
	c.Limits.MaxRepositories = 0
	want := `sync.historic_retry_max: must be >= sync.historic_retry_base (30s), got "1s"` + "\n" +
		`negentropy.claim_wait: must be > 0, got "0s"` + "\n" +
		`trusted.interval: must be > 0, got "0s"` + "\n" +
		`limits.max_repositories: must be > 0, got "0"`
	if got := fmt.Sprint(c.Validate()); got != want {
		t.Fatalf("got %q\nwant %q", got, want)
	}
}
