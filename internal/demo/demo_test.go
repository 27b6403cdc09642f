package demo

import (
	"bytes"
	"context"
	"os/exec"
	"strings"
	"testing"
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
