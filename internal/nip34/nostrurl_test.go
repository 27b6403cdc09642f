package nip34

import (
	"errors"
	"slices"
	"testing"

	"github.com/nbd-wtf/go-nostr/nip19"
)

func TestParseNostrURL(t *testing.T) {
	const pk = "3bf0c63fcb93463407af97a5e5ee64fa883d107ef9e558472c4eb9aaaefa459d"
	npub, err := nip19.EncodePublicKey(pk)
	if err != nil {
		t.Fatal(err)
	}
	naddr, err := nip19.EncodeEntity(pk, KindRepoAnnouncement, "my repo", []string{"wss://relay.example"})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		raw  string
		want NostrURL
	}{
		{"nostr://" + npub + "/ngit", NostrURL{PubKey: pk, Identifier: "ngit"}},
		{"nostr://" + npub + "/relay.ngit.dev/ngit", NostrURL{PubKey: pk, Identifier: "ngit", Relays: []string{"wss://relay.ngit.dev"}}},
		{"nostr://" + npub + "/ws%3A%2F%2F127.0.0.1%3A7777/my%20repo", NostrURL{PubKey: pk, Identifier: "my repo", Relays: []string{"ws://127.0.0.1:7777"}}},
		{"NOSTR://Alice@Example.com/ngit/", NostrURL{NIP05: "alice@example.com", Identifier: "ngit"}},
		{"nostr://" + naddr, NostrURL{PubKey: pk, Identifier: "my repo", Relays: []string{"wss://relay.example"}}},
	} {
		got, err := ParseNostrURL(tc.raw)
		if err != nil {
			t.Errorf("%s: %v", tc.raw, err)
			continue
		}
		if got.PubKey != tc.want.PubKey || got.NIP05 != tc.want.NIP05 || got.Identifier != tc.want.Identifier || !slices.Equal(got.Relays, tc.want.Relays) {
			t.Errorf("%s: got %+v, want %+v", tc.raw, got, tc.want)
		}
	}
	for _, raw := range []string{
		"https://example.com/x.git", "nostr://", "nostr://" + npub, "nostr://nobody/x",
		"nostr://npub1xyz/x", "nostr://" + npub + "/a/b/c", "nostr://" + npub + "/http%3A%2F%2Fx/id",
		"nostr://" + npub + "/%zz",
	} {
		if _, err := ParseNostrURL(raw); !errors.Is(err, ErrNostrURL) {
			t.Errorf("%q: err %v, want ErrNostrURL", raw, err)
		}
	}
	if !IsNostrURL("Nostr://x") || IsNostrURL("nostr:npub1") || IsNostrURL("https://x") {
		t.Error("IsNostrURL")
	}
}

func FuzzParseNostrURL(f *testing.F) {
	f.Add("nostr://npub1sn0wdenkukak0d9dfczzeacvhkrgz92ak56egt7vdgzn8pv2wfqqhrjdv9/relay.ngit.dev/ngit")
	f.Add("nostr://alice@example.com/x")
	f.Fuzz(func(t *testing.T, raw string) {
		u, err := ParseNostrURL(raw)
		if err == nil && (u.Identifier == "" || u.PubKey == "" && u.NIP05 == "") {
			t.Fatalf("%q parsed to %+v", raw, u)
		}
	})
}
