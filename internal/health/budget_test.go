package health

import (
	"testing"
	"time"

	"github.com/grasp-sync/grasp-sync/internal/relay"
)

func TestTrackerSubscriptionBudget(t *testing.T) {
	tr, clock, _ := newTestTracker(t, nil)
	tr.Track(relayA)
	if got := tr.SubscriptionBudget(relayA); got != 20 {
		t.Fatalf("default budget = %d, want 20", got)
	}

	// NIP-11 max_subscriptions replaces the default, up or down.
	tr.SetLimits(relayA, relay.Limits{MaxSubscriptions: 50, MaxFilters: 10, MaxLimit: 500, MaxMessageLength: 65536})
	if got := tr.SubscriptionBudget(relayA); got != 50 {
		t.Fatalf("budget with NIP-11 = %d, want 50", got)
	}
	if got, want := tr.Limits(relayA), (relay.Limits{MaxSubscriptions: 50, MaxFilters: 10, MaxLimit: 500, MaxMessageLength: 65536}); got != want {
		t.Fatalf("Limits = %+v, want %+v", got, want)
	}

	// strfry's NOTICE halves the budget once per holdoff; the relay stays
	// healthy and no cooldown starts.
	tr.Connected(relayA)
	if got := tr.Observe(relayA, SourceNotice, "ERROR: too many concurrent REQs"); got != SignalTooManySubscriptions {
		t.Fatalf("Observe = %s, want too_many_subscriptions", got)
	}
	wantState(t, tr, relayA, Healthy)
	if got := tr.CooldownRemaining(relayA); got != 0 {
		t.Fatalf("budget signal started a cooldown of %s", got)
	}
	if got := tr.SubscriptionBudget(relayA); got != 25 {
		t.Fatalf("budget after notice = %d, want 25", got)
	}
	clock.Advance(10*time.Second - time.Nanosecond)
	tr.Observe(relayA, SourceNotice, "ERROR: too many concurrent REQs")
	if got := tr.SubscriptionBudget(relayA); got != 25 {
		t.Fatalf("budget after notice within holdoff = %d, want 25", got)
	}
	for _, want := range []int{12, 6, 3, 1, 1, 1} {
		clock.Advance(10 * time.Second)
		tr.Observe(relayA, SourceClosed, "too many subscriptions")
		if got := tr.SubscriptionBudget(relayA); got != want {
			t.Fatalf("budget = %d, want %d", got, want)
		}
	}
	if got := tr.Limits(relayA).MaxSubscriptions; got != 1 {
		t.Fatalf("Limits().MaxSubscriptions = %d, want the learned 1", got)
	}

	// A learned budget survives a new NIP-11 document announcing more, and
	// a lower announcement wins over it.
	tr.SetLimits(relayA, relay.Limits{MaxSubscriptions: 300})
	if got := tr.SubscriptionBudget(relayA); got != 1 {
		t.Fatalf("budget after higher NIP-11 = %d, want 1", got)
	}
}

func TestTrackerSubscriptionBudgetFloorAndNoHoldoff(t *testing.T) {
	tr, _, _ := newTestTracker(t, func(c *Config) {
		c.MinSubscriptionBudget = 4
		c.BudgetHoldoff = 0
	})
	tr.Track(relayA)
	for _, want := range []int{10, 5, 4, 4} {
		tr.Observe(relayA, SourceNotice, "ERROR: too many concurrent REQs")
		if got := tr.SubscriptionBudget(relayA); got != want {
			t.Fatalf("budget = %d, want %d", got, want)
		}
	}
	// NIP-11 below the floor is respected: the floor only bounds learning.
	tr.SetLimits(relayA, relay.Limits{MaxSubscriptions: 2})
	if got := tr.SubscriptionBudget(relayA); got != 2 {
		t.Fatalf("budget with NIP-11 2 = %d, want 2", got)
	}
}

func TestTrackerSetLimitsIgnoresNegatives(t *testing.T) {
	tr, _, _ := newTestTracker(t, nil)
	tr.Track(relayA)
	tr.SetLimits(relayA, relay.Limits{MaxSubscriptions: -3, MaxFilters: -1, MaxLimit: -1, MaxMessageLength: -1})
	if got, want := tr.Limits(relayA), (relay.Limits{MaxSubscriptions: 20}); got != want {
		t.Fatalf("Limits = %+v, want %+v", got, want)
	}
}

func TestTrackerTooManyFiltersChangesNothing(t *testing.T) {
	tr, _, _ := newTestTracker(t, nil)
	tr.Track(relayA)
	tr.Connected(relayA)
	if got := tr.Observe(relayA, SourceClosed, "ERROR: too many filters"); got != SignalTooManyFilters {
		t.Fatalf("Observe = %s", got)
	}
	wantState(t, tr, relayA, Healthy)
	if got := tr.SubscriptionBudget(relayA); got != 20 {
		t.Fatalf("budget = %d, want 20", got)
	}
	if got := tr.Observe(relayA, SourceNegErr, "blocked: too many query results"); got != SignalNone {
		t.Fatalf("NEG-ERR blocked = %s, want none", got)
	}
	wantState(t, tr, relayA, Healthy)
}

// TestTrackerLearnedLimits: bounds taught by refusals lower the announced
// (or unannounced) limits, only ever go down, have a floor, survive a new
// NIP-11 document, and an untracked relay learns nothing.
func TestTrackerLearnedLimits(t *testing.T) {
	tr, _, _ := newTestTracker(t, nil)
	tr.Track(relayA)
	tr.SetLimits(relayA, relay.Limits{MaxMessageLength: 131072})
	if !tr.Learn(relayA, relay.Limits{MaxFilters: 50, MaxMessageLength: 60000}, "test") {
		t.Fatal("Learn lowered nothing")
	}
	l := tr.Limits(relayA)
	if l.MaxFilters != 50 || l.MaxMessageLength != 60000 {
		t.Fatalf("limits after Learn = %+v", l)
	}
	// Higher values teach nothing.
	if tr.Learn(relayA, relay.Limits{MaxFilters: 80, MaxMessageLength: 100000}, "test") {
		t.Fatal("a higher bound counted as learned")
	}
	// A new NIP-11 document does not erase what the relay did; a smaller
	// announced limit wins.
	tr.SetLimits(relayA, relay.Limits{MaxFilters: 20, MaxMessageLength: 131072})
	if l := tr.Limits(relayA); l.MaxFilters != 20 || l.MaxMessageLength != 60000 {
		t.Fatalf("limits after NIP-11 again = %+v", l)
	}
	// Floors: one filter, 8,192 bytes.
	tr.Learn(relayA, relay.Limits{MaxFilters: -3, MaxMessageLength: 10}, "test")
	tr.Learn(relayA, relay.Limits{MaxFilters: 0}, "test")
	if l := tr.Limits(relayA); l.MaxFilters != 20 || l.MaxMessageLength != 8192 {
		t.Fatalf("limits after tiny bounds = %+v", l)
	}
	// Tag values: NIP-11 has none, only learned.
	tr.Learn(relayA, relay.Limits{MaxTagValues: 10}, "test")
	tr.Learn(relayA, relay.Limits{MaxTagValues: 50}, "test")
	if l := tr.Limits(relayA); l.MaxTagValues != 10 {
		t.Fatalf("MaxTagValues = %d, want 10", l.MaxTagValues)
	}
	if tr.Learn(relayB, relay.Limits{MaxFilters: 1}, "test") {
		t.Fatal("an untracked relay learned")
	}
}
