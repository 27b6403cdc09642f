package relay

import (
	"reflect"
	"strings"
	"testing"

	"github.com/nbd-wtf/go-nostr"
)

// decodeSeeds are event objects of every shape the fast decoder takes and
// of shapes it leaves to go-nostr.
func decodeSeeds(t testing.TB) []string {
	ev := nostr.Event{Kind: 1617, CreatedAt: 1700000000,
		Content: "diff --git a/x b/x\n+\tline \"quoted\" \\ back/slash\r\n\b\f é ☃",
		Tags:    nostr.Tags{{"a", "30617:" + strings.Repeat("a", 64) + ":repo"}, {"t", "root"}, {"e", strings.Repeat("b", 64), "", "reply"}, {}}}
	if err := ev.Sign(strings.Repeat("1", 64)); err != nil {
		t.Fatal(err)
	}
	signed, err := ev.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	return []string{
		string(signed),
		`{}`, ` { } `,
		`{"id":"ab","kind":1,"created_at":-5,"tags":[],"content":"","sig":"","pubkey":"p"}`,
		`{ "kind" : 7 , "tags" : [ [ "x" , "y" ] , [ ] ] }`,
		`{"content":"a\nb\u00e9"}`, `{"content":"\ud800"}`, `{"content":"\ud83d\ude00\udc00x\ud800\u0041"}`,
		`{"content":"\u00zz"}`, `{"content":"\u12"}`, `{"content":"\u003c\u2028\u005c\""}`, `{"content":"a\qb"}`, `{"content":"a\\"}`,
		`{"content":"a\"}`, `{"content":"x","content":"y"}`, `{"tags":[["a"]],"tags":[["b"]]}`,
		`{"kind":1.0}`, `{"kind":1e3}`, `{"kind":007}`, `{"kind":-0}`, `{"kind":"1"}`, `{"kind":99999999999999999999}`,
		`{"kind":1,"other":2}`, `{"id":null}`, `{"tags":null}`, `{"tags":[null]}`, `{"tags":[["a",null]]}`,
		`{"tags":[["a",1]]}`, `{"tags":[["a"],]}`, `{"tags":[["a"]}`, `{"kind":1,}`, `{"kind":1}}`, `{"kind":1} x`,
		`{"ki\nd":1}`, `{"kind" 1}`, `{"created_at":1700000000,"kind":30617}`, `{"sig":"\/"}`,
	}
}

// checkDecode: whatever eventDecoder decodes, go-nostr decodes the same.
func checkDecode(t *testing.T, obj string) bool {
	var d eventDecoder
	var fast nostr.Event
	if !d.decode([]byte(obj), &fast) {
		return false
	}
	var slow nostr.Event
	if err := slow.UnmarshalJSON([]byte(obj)); err != nil {
		t.Fatalf("%q: decoded by eventDecoder, refused by go-nostr: %v", obj, err)
	}
	if !reflect.DeepEqual(fast, slow) {
		t.Fatalf("%q:\neventDecoder %#v\ngo-nostr     %#v", obj, fast, slow)
	}
	return true
}

func TestDecodeAgreesWithGoNostr(t *testing.T) {
	fast := 0
	for _, obj := range decodeSeeds(t) {
		if checkDecode(t, obj) {
			fast++
		}
	}
	// the signed event, the empty objects, the two with every field or
	// spaces, the five with escapes, "-0" and created_at
	if fast != 13 {
		t.Fatalf("%d seeds decoded by eventDecoder, want 13", fast)
	}
}

// TestDecodeTagsSized: tags are allocated at their size, so appending to
// one tag cannot write into the next.
func TestDecodeTagsSized(t *testing.T) {
	var d eventDecoder
	var ev nostr.Event
	if !d.decode([]byte(`{"tags":[["a","1"],["b","2"]]}`), &ev) {
		t.Fatal("not decoded")
	}
	_ = append(ev.Tags[0], "x")
	if ev.Tags[1][0] != "b" || cap(ev.Tags[0]) != 2 || cap(ev.Tags) != 2 {
		t.Fatalf("tags %q (caps %d, %d)", ev.Tags, cap(ev.Tags), cap(ev.Tags[0]))
	}
}

func FuzzDecodeEvent(f *testing.F) {
	for _, s := range decodeSeeds(f) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, obj string) { checkDecode(t, obj) })
}
