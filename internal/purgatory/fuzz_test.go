package purgatory

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/nbd-wtf/go-nostr"

	"github.com/grasp-sync/grasp-sync/internal/purgatory/gitx"
)

// FuzzParseEntry feeds arbitrary tag sets to the event parser: it must not
// panic, and whatever it accepts must be safe to hand to git.
func FuzzParseEntry(f *testing.F) {
	o := strings.Repeat("a", 40)
	pk := strings.Repeat("b", 64)
	seeds := []nostr.Tags{
		{{"d", "repo"}, {"refs/heads/main", o}, {"HEAD", "ref: refs/heads/main"}},
		{{"d", "repo"}, {"refs/tags/v1", o}, {"refs/tags/v1^{}", o}},
		{{"d", "../x"}, {"refs/heads/main", o}},
		{{"d", "r"}, {"refs/heads/a..b", o}},
		{{"a", "30617:" + pk + ":repo"}, {"c", o}, {"clone", "https://x/y.git", "-oops"}},
		{{"a", "30617:" + pk + ":-x"}, {"c", o}},
		{{"HEAD"}, {"d"}, {}},
	}
	for _, tags := range seeds {
		b, _ := json.Marshal(tags)
		for _, kind := range []int{KindState, KindPR, KindPRUpdate} {
			f.Add(kind, string(b))
		}
	}
	f.Fuzz(func(t *testing.T, kind int, tagsJSON string) {
		var tags nostr.Tags
		if json.Unmarshal([]byte(tagsJSON), &tags) != nil {
			return
		}
		ev := &nostr.Event{ID: strings.Repeat("c", 64), PubKey: pk, Kind: kind, Tags: tags}
		e, err := parseEntry(ev, 4)
		if err != nil {
			return
		}
		if gitx.ValidateIdentifier(e.identifier) != nil {
			t.Fatalf("accepted identifier %q", e.identifier)
		}
		for _, r := range e.refs {
			if gitx.ValidateRefName(r.Ref) != nil || !gitx.ValidOID(r.OID) {
				t.Fatalf("accepted ref %q -> %q", r.Ref, r.OID)
			}
		}
		for _, x := range e.oids {
			if !gitx.ValidOID(x) {
				t.Fatalf("accepted oid %q", x)
			}
		}
		if e.head != "" && gitx.ValidateRefName("refs/heads/"+e.head) != nil {
			t.Fatalf("accepted HEAD %q", e.head)
		}
		if len(e.cloneURLs) > 4 {
			t.Fatalf("clone URLs not bounded: %d", len(e.cloneURLs))
		}
		if (kind == KindPR || kind == KindPRUpdate) && len(e.oids) != 1 {
			t.Fatalf("PR with %d oids", len(e.oids))
		}
	})
}
