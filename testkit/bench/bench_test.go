package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"
)

// buildBinary builds the grasp-sync executable the sidecar runs use.
func buildBinary(t *testing.T) string {
	t.Helper()
	bin, err := BuildBinary(context.Background(), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return bin
}

// TestBenchSmallProfile runs every run of the small profile end to end and
// checks that each converged and that the report is consistent. Under the
// race detector (20× slower signing and relays) it runs a reduced profile
// of 600 events on 2 relays: sidecar, resync and baseline.
func TestBenchSmallProfile(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end benchmark")
	}
	prof, runs := Profiles["small"], slices.DeleteFunc(slices.Clone(AllRuns), func(r string) bool { return r == RunStrfrySync }) // needs a strfry
	if raceEnabled {
		// Under the race detector khatru ingests ~30 events/s on the shared
		// 2-core machine and REQ-only paging did not finish 1,000 events
		// in 90 s (see BENCHMARKS.md): a reduced profile, without the
		// ingest and REQ-only runs.
		prof = Profile{Name: "small-race", Events: 600, Relays: 2, Repos: 12}
		runs = []string{RunSidecar, RunResync, RunBaseline}
	}
	var progress bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	rep, err := Run(ctx, Options{
		Profile:  prof,
		Runs:     runs,
		Binary:   buildBinary(t),
		WorkDir:  t.TempDir(),
		Timeout:  90 * time.Second,
		Progress: &progress,
	})
	t.Logf("progress:\n%s", progress.String())
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	var table bytes.Buffer
	if err := rep.WriteTable(&table); err != nil {
		t.Fatal(err)
	}
	t.Logf("\n%s", table.String())

	if got, want := len(rep.Runs), len(runs); got != want {
		t.Fatalf("runs = %d, want %d", got, want)
	}
	for i, r := range rep.Runs {
		if r.Name != runs[i] {
			t.Errorf("run %d = %s, want %s", i, r.Name, runs[i])
		}
		if !r.Converged {
			t.Errorf("%s did not converge", r.Name)
		}
		if !strings.Contains(table.String(), r.Name) {
			t.Errorf("table lacks %s", r.Name)
		}
	}
	if rep.Expected != prof.Events-prof.Repos {
		t.Errorf("expected = %d, want %d (all but the announcements)", rep.Expected, prof.Events-prof.Repos)
	}
	for _, name := range []string{RunIngest, RunSidecar, RunReqOnly, RunBaseline} {
		r, ok := rep.Run(name)
		if !ok {
			continue
		}
		if r.Events != rep.Expected {
			t.Errorf("%s: own relay gained %d events, want %d", name, r.Events, rep.Expected)
		}
		if r.OwnSent == 0 {
			t.Errorf("%s: no bytes published to the own relay", name)
		}
	}
	sc, _ := rep.Run(RunSidecar)
	rs, _ := rep.Run(RunResync)
	if sc.CPUSeconds <= 0 || sc.PeakRSSBytes <= 0 || sc.EventsReceived < uint64(rep.Expected) {
		t.Errorf("sidecar process figures missing: cpu %.2fs, rss %d, received %d", sc.CPUSeconds, sc.PeakRSSBytes, sc.EventsReceived)
	}
	if sc.EventsNew < uint64(rep.Expected) || sc.EventsNew > sc.EventsReceived || len(sc.Relays) == 0 {
		t.Errorf("sidecar: %d events new of %d received over %d relays; want at least the %d to sync, at most those received", sc.EventsNew, sc.EventsReceived, len(sc.Relays), rep.Expected)
	}
	if sc.RemoteReceived == 0 || sc.RemoteSent == 0 {
		t.Errorf("sidecar: no remote wire bytes counted")
	}
	if rs.Events != 0 {
		t.Errorf("resync: own relay gained %d events, want 0", rs.Events)
	}
	// nothing changed: the remotes send far less than the first time
	if rs.RemoteReceived*4 > sc.RemoteReceived {
		t.Errorf("resync received %d bytes from the remotes, first run %d", rs.RemoteReceived, sc.RemoteReceived)
	}
	if len(rep.Goals) < 5 {
		t.Errorf("goals = %d, want at least 5", len(rep.Goals))
	}

	var js bytes.Buffer
	if err := rep.WriteJSON(&js); err != nil {
		t.Fatal(err)
	}
	var back Report
	if err := json.Unmarshal(js.Bytes(), &back); err != nil {
		t.Fatalf("JSON does not decode: %v", err)
	}
	if len(back.Runs) != len(rep.Runs) || back.Runs[0].Events != rep.Runs[0].Events {
		t.Errorf("JSON round trip lost runs: %+v", back.Runs)
	}
}

func TestOptionsValidation(t *testing.T) {
	tests := []struct {
		name string
		opts Options
		want string
	}{
		{"tiny profile", Options{Profile: Profile{Events: 3, Relays: 1, Repos: 2}}, "events >= 2*repos"},
		{"unknown run", Options{Profile: Profiles["small"], Runs: []string{"nope"}}, `unknown run "nope"`},
		{"resync alone", Options{Profile: Profiles["small"], Runs: []string{RunResync}}, "needs run sidecar"},
		{"no binary", Options{Profile: Profiles["small"], Runs: []string{RunSidecar}}, "Binary"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Run(context.Background(), tt.opts)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want it to contain %q", err, tt.want)
			}
		})
	}
}

func TestProfileNamesSorted(t *testing.T) {
	got := strings.Join(ProfileNames(), ",")
	if want := "forge,small,medium,one-relay,large"; got != want {
		t.Fatalf("ProfileNames = %s, want %s", got, want)
	}
}
