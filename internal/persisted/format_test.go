package persisted

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/nbd-wtf/go-nostr"
)

// TestFormat pins the JSON of every record: it is the state store's
// on-disk format, and a store written by an earlier version must load.
func TestFormat(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC)
	const ts = `"2026-01-02T03:04:05.000000006Z"`
	ev := &nostr.Event{ID: "aa", PubKey: "bb", CreatedAt: 7, Kind: 30618, Tags: nostr.Tags{{"d", "x"}}, Content: "c", Sig: "ss"}
	const evJSON = `{"kind":30618,"id":"aa","pubkey":"bb","created_at":7,"tags":[["d","x"]],"content":"c","sig":"ss"}`
	for _, c := range []struct {
		name string
		v    any
		want string
	}{
		{"relay", Relay{URL: "wss://r", Repos: []string{"a"}, Roots: []string{"b"}, LastConnected: at, DisconnectedAt: at, SeenUp: at, Negentropy: "supported", NegentropyAt: at, HistoricDone: true, ConfirmedGen: 9},
			`{"url":"wss://r","repos":["a"],"roots":["b"],"last_connected":` + ts + `,"disconnected_at":` + ts + `,"seen_up":` + ts + `,"negentropy":"supported","negentropy_at":` + ts + `,"historic_done":true}`},
		{"empty relay", Relay{}, `{"url":""}`},
		{"repos", Repos{Roots: map[string][]string{"k": {"r"}}, SelfSeen: at, Gen: 3, Heads: []Head{{ID: "aa", JSON: json.RawMessage(`{"id":"aa"}`)}}, HeadsGen: 4},
			`{"roots":{"k":["r"]},"self_seen":` + ts + `,"heads":[{"ID":"aa","JSON":{"id":"aa"}}]}`},
		{"empty repos", Repos{}, `{"roots":null}`},
		{"health", Health{URL: "wss://h", Failures: 2, FailingSince: at, NextAttempt: at, NaughtyUntil: at, CooldownUntil: at, LastError: "e",
			Learned: Limits{MaxSubscriptions: 1, MaxFilters: 2, MaxLimit: 3, MaxMessageLength: 4, MaxEventTags: 5, MaxContentLength: 6, CreatedAtLowerLimit: 7, MaxTagValues: 8}, LearnedAt: at},
			`{"url":"wss://h","failures":2,"failing_since":` + ts + `,"next_attempt":` + ts + `,"naughty_until":` + ts + `,"cooldown_until":` + ts + `,"last_error":"e",` +
				`"learned":{"max_subscriptions":1,"max_filters":2,"max_limit":3,"max_message_length":4,"max_event_tags":5,"max_content_length":6,"created_at_lower_limit":7,"max_tag_values":8},"learned_at":` + ts + `}`},
		{"empty health", Health{URL: "wss://h"}, `{"url":"wss://h"}`},
		{"held", Held{Event: ev, OnOwnRelay: true, Added: at, Attempts: 2, Next: at},
			`{"event":` + evJSON + `,"own":true,"added":` + ts + `,"attempts":2,"next":` + ts + `}`},
		{"empty held", Held{}, `{"event":null,"added":"0001-01-01T00:00:00Z","next":"0001-01-01T00:00:00Z"}`},
		{"rejected", Rejected{Key: 5, Cold: []byte{1, 2, 3}, Hot: []RejectedHot{{Event: ev, At: at}}},
			`{"key":5,"cold":"AQID","hot":[{"event":` + evJSON + `,"at":` + ts + `}]}`},
		{"empty rejected", Rejected{}, `{"key":0,"cold":null}`},
	} {
		b, err := json.Marshal(c.v)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if string(b) != c.want {
			t.Errorf("%s:\n got %s\nwant %s", c.name, b, c.want)
		}
	}
}
