package historic

import (
	"encoding/hex"
	"fmt"
	"testing"

	"github.com/nbd-wtf/go-nostr"

	"github.com/grasp-sync/grasp-sync/internal/neg"
	"github.com/grasp-sync/grasp-sync/internal/relay"
)

func testItem(t *testing.T, ts int, n int) neg.Item {
	t.Helper()
	it, err := neg.ItemFromHex(nostr.Timestamp(ts), fmt.Sprintf("%064x", n))
	if err != nil {
		t.Fatal(err)
	}
	return it
}

func TestIsCommonCap(t *testing.T) {
	for _, tc := range []struct {
		n, maxLimit int
		want        bool
	}{{250, 0, true}, {500, 0, true}, {1000, 0, true}, {499, 0, false}, {0, 0, false}, {300, 300, true}, {301, 300, false}} {
		if got := isCommonCap(tc.n, tc.maxLimit); got != tc.want {
			t.Errorf("isCommonCap(%d, %d) = %v, want %v", tc.n, tc.maxLimit, got, tc.want)
		}
	}
}

// TestBuildRemoteSet: the relay's set is our items minus what it lacks,
// plus what we fetched; haveBelow when everything it lacks is older than
// everything it has.
func TestBuildRemoteSet(t *testing.T) {
	local := neg.NewStorage([]neg.Item{testItem(t, 10, 1), testItem(t, 20, 2), testItem(t, 30, 3)})
	id := func(i int) string { it := local.Item(i); return hex.EncodeToString(it.ID[:]) }
	have := []string{id(0)} // the relay lacks the oldest
	fetched := []neg.Item{testItem(t, 25, 4), testItem(t, 20, 5)}
	rs := buildRemoteSet([]*neg.Storage{local}, have, fetched, nil)
	if rs.count != 4 || rs.oldest != 20 || len(rs.atOldest) != 2 || !rs.haveBelow {
		t.Fatalf("got %+v, want 4 items, oldest 20 (2 ids), haveBelow", rs)
	}
	// the relay lacking a newer item is no boundary
	have = []string{id(2)}
	if rs := buildRemoteSet([]*neg.Storage{local}, have, nil, nil); rs.haveBelow || rs.count != 2 || rs.oldest != 10 {
		t.Fatalf("got %+v, want 2 items from 10, no haveBelow", rs)
	}
	if rs := buildRemoteSet(nil, nil, nil, nil); rs.count != 0 || rs.haveBelow {
		t.Fatalf("empty: %+v", rs)
	}
	// ids of the set fetched from another relay or already seen count,
	// without a created_at: the oldest known item stays the bound
	other := map[string]bool{fmt.Sprintf("%064x", 6): true, fmt.Sprintf("%064x", 7): true}
	if rs := buildRemoteSet([]*neg.Storage{local}, []string{id(0)}, nil, other); rs.count != 4 || rs.oldest != 20 || len(rs.other) != 2 {
		t.Fatalf("with other ids: %+v, want 4 items, oldest 20, 2 other", rs)
	}
}

func TestMessageLimits(t *testing.T) {
	strfry := relay.Limits{}
	small := relay.Limits{MaxMessageLength: 20_000}
	if got := ReqBytesLimit(strfry); got != maxReqBytes {
		t.Errorf("ReqBytesLimit(unannounced) = %d, want %d", got, maxReqBytes)
	}
	if got := ReqBytesLimit(small); got != 20_000-1024 {
		t.Errorf("ReqBytesLimit(20000) = %d", got)
	}
	// a NEG-OPEN of hex frame plus filter fits
	for _, l := range []relay.Limits{strfry, small} {
		fl := negFrameLimit(60_000, l, 7_000)
		if 2*fl+7_000+256 > messageLimit(l) && fl != 4096 {
			t.Errorf("frame %d with a 7000-byte filter does not fit %d", fl, messageLimit(l))
		}
	}
	if got := negFrameLimit(60_000, relay.Limits{MaxMessageLength: 512_000}, 100); got != 60_000 {
		t.Errorf("a larger relay limit raised the frame limit to %d", got)
	}
	if got := idsPerReq(500, small); got*67+256 > 20_000 {
		t.Errorf("idsPerReq(500, 20000) = %d does not fit", got)
	}
	if got := idsPerReq(500, strfry); got != 500 {
		t.Errorf("idsPerReq(500, unannounced) = %d", got)
	}
}
