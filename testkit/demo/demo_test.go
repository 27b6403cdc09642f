package demo

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"
)

func TestDemoSyncsEverything(t *testing.T) {
	var out bytes.Buffer
	opts := DefaultOptions()
	sum, err := Run(context.Background(), &out, opts)
	t.Log(out.String())
	if err != nil {
		t.Fatal(err)
	}
	if sum.Arrived != sum.Expected || sum.Expected < 50 {
		t.Fatalf("arrived %d of %d", sum.Arrived, sum.Expected)
	}
	if sum.Published == 0 {
		t.Fatal("summary reports nothing published")
	}
	// With git, a state event is held until its commit is fetched from the
	// git server, then published.
	if _, err := exec.LookPath("git"); err == nil {
		if !sum.Git || !sum.Held || !sum.Released || sum.GitRequests == 0 {
			t.Errorf("git %v held %v released %v git requests %d", sum.Git, sum.Held, sum.Released, sum.GitRequests)
		}
		for _, want := range []string{"purgatory holds the state event of", "released: ", "fetched from the git server"} {
			if !strings.Contains(out.String(), want) {
				t.Errorf("output lacks %q", want)
			}
		}
	}
	// Received counts copies; new is what the own relay accepted.
	if sum.Received <= uint64(sum.Expected) || sum.Published != uint64(sum.Expected) {
		t.Errorf("received %d, published %d, expected %d", sum.Received, sum.Published, sum.Expected)
	}
	for _, want := range []string{"summary", "remote A", "remote B", "published into the own relay", "events received", "new (accepted)"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q", want)
		}
	}
}

// A timeout says the time and the numbers of the summary printed above it.
// The purgatory holds the state event for an hour, so the timeout comes
// while the sidecar syncs however long the relays and the git server take
// to set up (a 700 ms timeout with the 1 s hold expired during the setup
// on a loaded machine, before any summary).
func TestDemoTimeoutAgreesWithSummary(t *testing.T) {
	var out bytes.Buffer
	opts := DefaultOptions()
	opts.Repos = 1
	opts.Hold = time.Hour
	opts.Timeout = 5 * time.Second
	sum, err := Run(context.Background(), &out, opts)
	t.Log(out.String())
	if err == nil {
		if _, gitErr := exec.LookPath("git"); gitErr == nil {
			t.Fatal("no timeout although the purgatory holds the state event for an hour")
		}
		t.Skip("synced within the timeout (no git, nothing held)")
	}
	m := regexp.MustCompile(`(?m)^summary \((\d+\.\d)s\)$`).FindStringSubmatch(out.String())
	if m == nil {
		t.Fatalf("no summary time in:\n%s\nerror: %v", out.String(), err)
	}
	want := fmt.Sprintf("timed out after %ss (--timeout 5s): the own relay holds %d of the %d expected events", m[1], sum.Arrived, sum.Expected)
	if err.Error() != want {
		t.Errorf("error %q, want %q", err, want)
	}
	if !strings.Contains(out.String(), fmt.Sprintf("own relay now holds %d of the %d expected events", sum.Arrived, sum.Expected)) {
		t.Errorf("summary does not end with the error's numbers:\n%s", out.String())
	}
}
