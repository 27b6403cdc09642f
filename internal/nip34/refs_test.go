package nip34

import (
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/nbd-wtf/go-nostr"
)

// FuzzRootRefs: RootRefs and References never panic, root refs are
// announcement addresses, and references are bounded in size.
func FuzzRootRefs(f *testing.F) {
	f.Add(1617, "a", "30617:"+strings.Repeat("a", 64)+":repo", "t", "root")
	f.Add(1621, "a", "30617:x", "e", "abc")
	f.Add(1618, "q", strings.Repeat("z", 300), "A", "30617:p:d:extra")
	f.Add(1, "a", "30617:p:d", "", "")
	f.Fuzz(func(t *testing.T, kind int, k1, v1, k2, v2 string) {
		ev := &nostr.Event{Kind: kind, Tags: nostr.Tags{{k1, v1}, {k2, v2}, {k1}}}
		refs, ok := RootRefs(ev)
		if ok != (len(refs) > 0) {
			t.Fatalf("ok=%v with %d refs", ok, len(refs))
		}
		for _, r := range refs {
			if !strings.HasPrefix(r, fmt.Sprintf("%d:", 30617)) || strings.Count(r, ":") != 2 {
				t.Fatalf("root ref %q is no announcement address", r)
			}
		}
		for _, r := range References(ev) {
			if len(r) > 200 {
				t.Fatalf("reference of %d bytes", len(r))
			}
		}
	})
}

func TestRootRefs(t *testing.T) {
	repo := "30617:" + fmt.Sprintf("%064d", 1) + ":proj"
	tests := []struct {
		name string
		ev   *nostr.Event
		ok   bool
	}{
		{"issue", &nostr.Event{Kind: 1621, Tags: nostr.Tags{{"a", repo}}}, true},
		{"pr", &nostr.Event{Kind: 1618, Tags: nostr.Tags{{"a", repo}}}, true},
		{"root patch", &nostr.Event{Kind: 1617, Tags: nostr.Tags{{"a", repo}, {"t", "root"}}}, true},
		{"patch without e", &nostr.Event{Kind: 1617, Tags: nostr.Tags{{"a", repo}}}, true},
		{"reply patch", &nostr.Event{Kind: 1617, Tags: nostr.Tags{{"a", repo}, {"e", "x"}}}, false},
		{"comment", &nostr.Event{Kind: 1111, Tags: nostr.Tags{{"a", repo}}}, false},
		{"issue without a", &nostr.Event{Kind: 1621}, false},
		{"issue with bad a", &nostr.Event{Kind: 1621, Tags: nostr.Tags{{"a", "1:x"}}}, false},
	}
	for _, tt := range tests {
		refs, ok := RootRefs(tt.ev)
		if ok != tt.ok || ok && !reflect.DeepEqual(refs, []string{repo}) {
			t.Errorf("%s: got %v %v", tt.name, refs, ok)
		}
	}
}

func TestReferences(t *testing.T) {
	ev := &nostr.Event{Kind: 30618, Tags: nostr.Tags{{"d", "proj"}, {"e", "x"}, {"a", "30617:p:proj"}, {"p", "ignored"}, {"E", "y"}, {"q", "z"}}}
	got := References(ev)
	want := []string{"30617:*:proj", "x", "30617:p:proj", "y", "z"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
}

func TestListsService(t *testing.T) {
	ann := func(tags ...nostr.Tag) *nostr.Event {
		return &nostr.Event{Kind: KindRepoAnnouncement, Tags: append(nostr.Tags{{"d", "r"}}, tags...)}
	}
	for _, c := range []struct {
		name   string
		ev     *nostr.Event
		domain string
		want   bool
	}{
		{"both", ann(nostr.Tag{"clone", "https://other.org/x.git", "https://Git.Example.com/npub1x/r.git"}, nostr.Tag{"relays", "wss://relay.damus.io", "wss://git.example.com"}), "git.example.com", true},
		{"default ports", ann(nostr.Tag{"clone", "https://git.example.com:443/npub1x/r.git"}, nostr.Tag{"relays", "ws://git.example.com:80"}), "git.example.com", true},
		{"explicit port", ann(nostr.Tag{"clone", "http://127.0.0.1:7000/npub1x/r.git"}, nostr.Tag{"relays", "ws://127.0.0.1:7000"}), "127.0.0.1:7000", true},
		{"clone only", ann(nostr.Tag{"clone", "https://git.example.com/npub1x/r.git"}, nostr.Tag{"relays", "wss://relay.damus.io"}), "git.example.com", false},
		{"relays only", ann(nostr.Tag{"clone", "https://github.com/x/r.git"}, nostr.Tag{"relays", "wss://git.example.com"}), "git.example.com", false},
		{"other port", ann(nostr.Tag{"clone", "http://127.0.0.1:7001/npub1x/r.git"}, nostr.Tag{"relays", "ws://127.0.0.1:7001"}), "127.0.0.1:7000", false},
		{"no domain", ann(nostr.Tag{"clone", "https://git.example.com/npub1x/r.git"}, nostr.Tag{"relays", "wss://git.example.com"}), "", false},
	} {
		if got := ListsService(c.ev, c.domain); got != c.want {
			t.Errorf("%s: ListsService = %v, want %v", c.name, got, c.want)
		}
	}
}
