package demo

import (
	"bytes"
	"context"
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
	for _, want := range []string{"summary", "remote A", "remote B", "published into the own relay"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q", want)
		}
	}
}
