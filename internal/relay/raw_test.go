package relay

import (
	"encoding/json"
	"testing"

	"github.com/nbd-wtf/go-nostr"
)

func TestEventJSON(t *testing.T) {
	ev := `{"id":"` + hex64 + `","pubkey":"` + hex64 + `","created_at":1,"kind":1,"tags":[["t","id"]],"content":"say \"id\": {x}","sig":"` + hex64 + hex64 + `"}`
	for _, c := range []struct {
		name, frame, sub string
		want             string
	}{
		{"plain", `["EVENT","s1",` + ev + `]`, "s1", ev},
		{"spaces", "[ \"EVENT\" , \"s1\" ,\n" + ev + " \n] ", "s1", ev},
		{"brace in sub id", `["EVENT","s{1",` + ev + `]`, "s{1", ""},
		{"two id keys", `["EVENT","s1",{"id":"a","id":"b"}]`, "s1", ""},
		{"no id key", `["EVENT","s1",{"kind":1}]`, "s1", ""},
	} {
		got := string(eventJSON([]byte(c.frame), c.sub))
		if got != c.want {
			t.Errorf("%s: got %q, want %q", c.name, got, c.want)
		}
		if c.want != "" {
			var a, b nostr.Event
			if err := json.Unmarshal([]byte(got), &a); err != nil {
				t.Fatalf("%s: %v", c.name, err)
			}
			_ = json.Unmarshal([]byte(ev), &b)
			if a.ID != b.ID || a.Content != b.Content {
				t.Errorf("%s: decodes to another event", c.name)
			}
		}
	}
}

const hex64 = "0000000000000000000000000000000000000000000000000000000000000001"
