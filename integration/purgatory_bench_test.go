package integration

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/nbd-wtf/go-nostr"

	"github.com/grasp-sync/grasp-sync/internal/purgatory/gitx"
)

// BenchmarkPurgatoryArrivalToRelease measures, with default delays (500 ms
// synced delay, 1 s loop), the time from a state event's arrival to its
// release on the own relay when its data is on a reachable server. Compare
// with BenchmarkPurgatoryFetchOnly: the goal is under 1 s plus the fetch.
func BenchmarkPurgatoryArrivalToRelease(b *testing.B) {
	env := startPurgatory(b, nil)
	srv := pgGitServer(b, 0)
	owner := newPgKey(b)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		d := fmt.Sprintf("bench-%d", i)
		remote, err := srv.CreateRepo(owner.rel(b, d))
		if err != nil {
			b.Fatal(err)
		}
		c := mustCommit(b, remote, "main", d)
		env.localRepo(b, owner, d)
		env.P.AddAnnouncement(pgAnnouncement(b, owner, d, []string{srv.CloneURL(owner.rel(b, d))}))
		ev := pgState(b, owner, d, nostr.Now(), map[string]string{"refs/heads/main": c}, "main")
		b.StartTimer()
		if err := env.P.Add(ev, false); err != nil {
			b.Fatal(err)
		}
		deadline := time.Now().Add(30 * time.Second)
		for {
			if _, ok := env.Own.has(ev.ID); ok {
				break
			}
			if time.Now().After(deadline) {
				b.Fatal("not released")
			}
			time.Sleep(time.Millisecond)
		}
	}
}

// BenchmarkPurgatoryFetchOnly is the fetch by id alone (one commit, same
// server setup), for comparison with the arrival-to-release time.
func BenchmarkPurgatoryFetchOnly(b *testing.B) {
	srv := pgGitServer(b, 0)
	owner := newPgKey(b)
	r := gitx.NewExec(30 * time.Second)
	ctx := context.Background()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		d := fmt.Sprintf("f-%d", i)
		remote, err := srv.CreateRepo(owner.rel(b, d))
		if err != nil {
			b.Fatal(err)
		}
		c := mustCommit(b, remote, "main", d)
		local := filepath.Join(b.TempDir(), "l.git")
		if err := gitx.InitBare(ctx, r, local); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		got, err := gitx.FetchOIDs(ctx, r, local, srv.CloneURL(owner.rel(b, d)), []string{c}, nil)
		if err != nil || len(got) != 1 {
			b.Fatalf("fetch: %v %v", got, err)
		}
	}
}
