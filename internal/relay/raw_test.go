package relay

import (
	"encoding/json"
	"testing"

	"github.com/nbd-wtf/go-nostr"
	"go.uber.org/zap"
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

func TestEventFrame(t *testing.T) {
	ev := `{"id":"` + hex64 + `","kind":1,"content":"] } \"EVENT\""}`
	for _, c := range []struct {
		name, frame string
		sub, obj    string
		ok          bool
	}{
		{"plain", `["EVENT","s1",` + ev + `]`, "s1", ev, true},
		{"spaces", " [ \"EVENT\" ,\t\"s1\" ,\n" + ev + " \n] ", "s1", ev, true},
		{"escaped sub id", `["EVENT","s\"1",` + ev + `]`, "", "", false},
		{"no sub id", `["EVENT",` + ev + `]`, "", "", false},
		{"fourth element", `["EVENT","s1",` + ev + `,1]`, "", "", false},
		{"not an object", `["EVENT","s1",null]`, "", "", false},
		{"other label", `["EVENTS","s1",` + ev + `]`, "", "", false},
		{"unterminated", `["EVENT","s1",` + ev, "", "", false},
	} {
		sub, obj, ok := eventFrame([]byte(c.frame))
		if ok != c.ok || string(sub) != c.sub || string(obj) != c.obj {
			t.Errorf("%s: eventFrame = %q, %q, %v; want %q, %q, %v", c.name, sub, obj, ok, c.sub, c.obj, c.ok)
		}
	}
}

// FuzzEventFrame: whenever the fast path splits a frame and its event
// decodes, go-nostr's envelope decoder (the generic path) reads the same
// subscription id and the same event from it.
func FuzzEventFrame(f *testing.F) {
	ev := `{"id":"` + hex64 + `","pubkey":"` + hex64 + `","created_at":1,"kind":1,"tags":[["t","id"]],"content":"say \"id\": {x}","sig":"` + hex64 + hex64 + `"}`
	for _, s := range []string{`["EVENT","s1",` + ev + `]`, `["EVENT","s1",{"id":"a"} {"id":"b"}]`, `["EVENT","s1",{}]`, `["EVENT","",{"kind":1}]`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		sub, obj, ok := eventFrame(data)
		if !ok {
			return
		}
		var fast nostr.Event
		if fast.UnmarshalJSON(obj) != nil {
			return
		}
		var env nostr.EventEnvelope
		if err := env.FromJSON(string(data)); err != nil || env.SubscriptionID == nil {
			t.Fatalf("fast path took %q, envelope decoder refused it: %v", data, err)
		}
		if *env.SubscriptionID != string(sub) {
			t.Fatalf("sub id %q, envelope decoder %q", sub, *env.SubscriptionID)
		}
		a, _ := json.Marshal(fast)
		b, _ := json.Marshal(env.Event)
		if string(a) != string(b) {
			t.Fatalf("event %s, envelope decoder %s", a, b)
		}
	})
}

// A connection dialled with NoRaw delivers the event without its bytes.
func TestNoRawKeepsNoBytes(t *testing.T) {
	frame := `["EVENT","s1",{"id":"` + hex64 + `","kind":1,"content":"x"}]`
	for _, noRaw := range []bool{false, true} {
		var frames []string
		c, sub, _, _ := fuzzConn(t, zap.NewNop(), &frames)
		c.opts.NoRaw = noRaw
		c.handle([]byte(frame))
		m := <-sub.ch
		if m.Event == nil || m.Event.ID != hex64 || (m.Raw == nil) != noRaw {
			t.Errorf("NoRaw %v: event %v, raw %q", noRaw, m.Event, m.Raw)
		}
	}
}
