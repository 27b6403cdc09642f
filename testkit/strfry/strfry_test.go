package strfry_test

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/nbd-wtf/go-nostr"

	"github.com/grasp-sync/grasp-sync/testkit/signed"
	"github.com/grasp-sync/grasp-sync/testkit/strfry"
)

// TestImportCountSync starts two strfry relays, imports events into one,
// counts them over COUNT, and copies them into the other with strfry's own
// sync through Command.
func TestImportCountSync(t *testing.T) {
	bin := os.Getenv(strfry.EnvBinary)
	if bin == "" {
		t.Skip(strfry.EnvBinary + " is not set (the path of a strfry binary)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	src, err := strfry.Start(ctx, bin, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	dst, err := strfry.Start(ctx, bin, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer dst.Close()

	alice := signed.NewKey()
	ann := alice.Announcement("proj")
	evs := []*nostr.Event{ann}
	for i := 0; i < 20; i++ {
		evs = append(evs, alice.Issue(alice.RepoAddress("proj"), fmt.Sprintf("issue %d", i)))
	}
	if err := src.Import(ctx, evs); err != nil {
		t.Fatal(err)
	}
	if n, err := src.Count(ctx); err != nil || n != len(evs) {
		t.Fatalf("source counts %d (%v), want %d", n, err, len(evs))
	}
	if n := dst.Len(); n != 0 {
		t.Fatalf("fresh relay counts %d, want 0", n)
	}
	if out, err := dst.Command(ctx, "sync", src.URL(), "--dir", "down").CombinedOutput(); err != nil {
		t.Fatalf("strfry sync: %v: %s", err, out)
	}
	if n := dst.Len(); n != len(evs) {
		t.Fatalf("after strfry sync the destination counts %d, want %d", n, len(evs))
	}
}
