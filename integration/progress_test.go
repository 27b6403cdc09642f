package integration

import (
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/nbd-wtf/go-nostr"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/grasp-sync/grasp-sync/internal/httpapi"
	"github.com/grasp-sync/grasp-sync/internal/sidecar"
	"github.com/grasp-sync/grasp-sync/internal/status"
	"github.com/grasp-sync/grasp-sync/testkit"
	"github.com/grasp-sync/grasp-sync/testkit/harness"
	"github.com/grasp-sync/grasp-sync/testkit/signed"
)

// TestProgressLineAgreesWithStatus: a sidecar syncing repositories listed
// on one or two remote relays logs progress lines whose repositories is
// /status's repositories, and whose relay_repo_pairs and
// relay_repo_pairs_confirmed are /status's relays' repositories
// total/confirmed summed: a different quantity (a repository listed on two
// relays counts twice), under a name of its own.
func TestProgressLineAgreesWithStatus(t *testing.T) {
	own := ownRelay(t)
	a := harness.Start(t, harness.RelayOptions{Name: "A", Negentropy: true})
	b := harness.Start(t, harness.RelayOptions{Name: "B"})
	alice, bob := signed.NewKey(), signed.NewKey()
	var anns, issues []*nostr.Event
	for i := range 5 {
		d := fmt.Sprintf("repo-%d", i)
		relays := []*harness.Relay{a, b}
		if i >= 3 {
			relays = relays[:1] // listed on A only
		}
		ann := repoFor(alice, d, own, relays...)
		anns = append(anns, ann)
		issue := bob.Issue(alice.RepoAddress(d), "bug in "+d)
		issues = append(issues, issue)
		for _, r := range relays {
			r.Inject(ann, issue)
		}
	}
	mustPublish(t, own, anns...)

	cfg := fastConfig(own)
	cfg.Log.ProgressInterval = 200 * time.Millisecond
	core, logs := observer.New(zapcore.InfoLevel)
	sc := startSidecarDeps(t, cfg, sidecar.Deps{Log: zap.New(core)})
	srv := serveHTTP(t, httpapi.Options{Provider: sc})
	waitHas(t, own, issues...)
	testkit.WaitFor(t, syncTimeout, "a sync caught up line", func() bool {
		return logs.FilterMessage("sync caught up").Len() > 0
	})

	// The line and the document are taken at different instants: compare
	// a few times before calling a difference a disagreement.
	var problems []string
	for try := 0; try < 5; try++ {
		st := getStatus(t, "http://"+srv.Addr()+"/status")
		lines := append(logs.FilterMessage("sync progress").All(), logs.FilterMessage("sync caught up").All()...)
		last := lines[0]
		for _, l := range lines {
			if l.Time.After(last.Time) {
				last = l
			}
		}
		problems = compareProgress(last.ContextMap(), st)
		if len(problems) == 0 {
			t.Logf("%q: repositories %d, relay-repository pairs %v/%v", last.Message, st.Repositories,
				last.ContextMap()["relay_repo_pairs_confirmed"], last.ContextMap()["relay_repo_pairs"])
			break
		}
		t.Logf("try %d: %v", try+1, problems)
		time.Sleep(300 * time.Millisecond)
	}
	for _, p := range problems {
		t.Error(p)
	}
}

// compareProgress compares a progress line's fields with /status.
func compareProgress(line map[string]any, st status.Snapshot) []string {
	var problems []string
	pairs, confirmed := 0, 0
	for _, r := range st.Relays {
		pairs += r.ReposConfirmed + r.ReposPending
		confirmed += r.ReposConfirmed
	}
	// 5 repositories, 3 of them listed on both remote relays.
	if st.Repositories != 5 || pairs != 8 {
		problems = append(problems, fmt.Sprintf("/status: %d repositories and %d relay-repository pairs, want 5 and 8", st.Repositories, pairs))
	}
	for _, c := range []struct {
		field string
		want  int
	}{
		{"repositories", st.Repositories},
		{"relay_repo_pairs", pairs},
		{"relay_repo_pairs_confirmed", confirmed},
		{"relays_total", len(st.Relays)},
	} {
		if got, ok := line[c.field].(int64); !ok || got != int64(c.want) {
			problems = append(problems, fmt.Sprintf("progress line %s = %v, /status says %d", c.field, line[c.field], c.want))
		}
	}
	for _, old := range []string{"repos_total", "repos_confirmed"} {
		if v, ok := line[old]; ok {
			problems = append(problems, fmt.Sprintf("progress line has %s = %v, a name read as a count of repositories", old, v))
		}
	}
	return problems
}

// getStatus fetches and decodes a /status document.
func getStatus(t *testing.T, url string) status.Snapshot {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var st status.Snapshot
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		t.Fatalf("%s: %v", url, err)
	}
	return st
}
