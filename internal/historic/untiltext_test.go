package historic

import (
	"testing"

	"github.com/nbd-wtf/go-nostr"
)

// TestUntilText: the error of a relay ignoring a page's until names the
// timestamp (it printed the pointer holding it, "0xc0090b08d8").
func TestUntilText(t *testing.T) {
	ts := nostr.Timestamp(1_700_000_000)
	if got := untilText(&ts); got != "1700000000" {
		t.Errorf("untilText(&%d) = %q", ts, got)
	}
	if got := untilText(nil); got != "(no bound)" {
		t.Errorf("untilText(nil) = %q", got)
	}
}
