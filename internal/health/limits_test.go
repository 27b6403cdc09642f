package health

import (
	"testing"
	"time"
)

func TestParseNIP11Limits(t *testing.T) {
	for _, tc := range []struct {
		name string
		doc  string
		want Limits
		err  bool
	}{
		{"full", `{"name":"r","limitation":{"max_subscriptions":300,"max_filters":100,"max_limit":5000,"max_message_length":131072,"auth_required":false}}`,
			Limits{MaxSubscriptions: 300, MaxFilters: 100, MaxLimit: 5000, MaxMessageLength: 131072}, false},
		{"no limitation", `{"name":"r","supported_nips":[1,11,77]}`, Limits{}, false},
		{"null limitation", `{"limitation":null}`, Limits{}, false},
		{"partial", `{"limitation":{"max_limit":500}}`, Limits{MaxLimit: 500}, false},
		{"strings and floats", `{"limitation":{"max_subscriptions":"20","max_filters":10.0,"max_limit":" 500 "}}`,
			Limits{MaxSubscriptions: 20, MaxFilters: 10, MaxLimit: 500}, false},
		{"negative and zero", `{"limitation":{"max_subscriptions":-1,"max_filters":0}}`, Limits{}, false},
		{"garbage values", `{"limitation":{"max_subscriptions":true,"max_filters":[1],"max_limit":"NaN","max_message_length":{}}}`, Limits{}, false},
		{"huge", `{"limitation":{"max_message_length":1e12}}`, Limits{MaxMessageLength: 1<<31 - 1}, false},
		{"not json", `<html>`, Limits{}, true},
		{"limitation not an object", `{"limitation":5}`, Limits{}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseNIP11Limits([]byte(tc.doc))
			if (err != nil) != tc.err {
				t.Fatalf("err = %v, want error %v", err, tc.err)
			}
			if got != tc.want {
				t.Fatalf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

func FuzzParseNIP11Limits(f *testing.F) {
	f.Add([]byte(`{"limitation":{"max_subscriptions":300,"max_filters":100,"max_limit":5000,"max_message_length":131072}}`))
	f.Add([]byte(`{"limitation":{"max_subscriptions":"1e400"}}`))
	f.Add([]byte(`{"limitation":{"max_limit":-5e-324}}`))
	f.Fuzz(func(t *testing.T, doc []byte) {
		l, err := ParseNIP11Limits(doc)
		if err != nil && l != (Limits{}) {
			t.Fatalf("error %v with non-zero limits %+v", err, l)
		}
		for _, v := range []int{l.MaxSubscriptions, l.MaxFilters, l.MaxLimit, l.MaxMessageLength} {
			if v < 0 || v > 1<<31-1 {
				t.Fatalf("limit out of range: %+v", l)
			}
		}
	})
}

func TestTrackerSubscriptionBudget(t *testing.T) {
	tr, clock, _ := newTestTracker(t, nil)
	tr.Track(relayA)
	if got := tr.SubscriptionBudget(relayA); got != 20 {
		t.Fatalf("default budget = %d, want 20", got)
	}

	// NIP-11 max_subscriptions replaces the default, up or down.
	tr.SetLimits(relayA, Limits{MaxSubscriptions: 50, MaxFilters: 10, MaxLimit: 500, MaxMessageLength: 65536})
	if got := tr.SubscriptionBudget(relayA); got != 50 {
		t.Fatalf("budget with NIP-11 = %d, want 50", got)
	}
	if got, want := tr.Limits(relayA), (Limits{MaxSubscriptions: 50, MaxFilters: 10, MaxLimit: 500, MaxMessageLength: 65536}); got != want {
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
	tr.SetLimits(relayA, Limits{MaxSubscriptions: 300})
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
	tr.SetLimits(relayA, Limits{MaxSubscriptions: 2})
	if got := tr.SubscriptionBudget(relayA); got != 2 {
		t.Fatalf("budget with NIP-11 2 = %d, want 2", got)
	}
}

func TestTrackerSetLimitsIgnoresNegatives(t *testing.T) {
	tr, _, _ := newTestTracker(t, nil)
	tr.Track(relayA)
	tr.SetLimits(relayA, Limits{MaxSubscriptions: -3, MaxFilters: -1, MaxLimit: -1, MaxMessageLength: -1})
	if got, want := tr.Limits(relayA), (Limits{MaxSubscriptions: 20}); got != want {
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
