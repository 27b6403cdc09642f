package relay

import (
	"context"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/grasp-sync/grasp-sync/testkit/harness"
	"github.com/nbd-wtf/go-nostr"
)

// BenchmarkReceive is the reading side of a sync: a relay (in-process
// khatru) sends a page of stored events as fast as it can and the
// connection delivers them to the subscription. One op is one event;
// run it with a fixed count (-benchtime 5000x). cpu-µs/event counts the
// whole process, the relay's work included.
func BenchmarkReceive(b *testing.B) {
	store := harness.NewStore()
	url := harness.StartKhatru(b, store, nil)
	pub := dialB(b, url)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	sk := nostr.GeneratePrivateKey()
	for i := range b.N {
		ev := &nostr.Event{Kind: 1617, CreatedAt: nostr.Timestamp(1700000000 + i), Content: strings.Repeat("+ line of a diff\n", 60)}
		if err := ev.Sign(sk); err != nil {
			b.Fatal(err)
		}
		if r := pub.PublishWait(ctx, ev); !r.OK {
			b.Fatalf("%+v", r)
		}
	}
	c := dialB(b, url)
	b.ResetTimer()
	cpu0 := processCPU()
	sub, err := c.Subscribe(ctx, "all", nostr.Filters{{Kinds: []int{1617}, Limit: b.N}})
	if err != nil {
		b.Fatal(err)
	}
	n := 0
	for m := range sub.Messages() {
		if m.Type == MsgEOSE {
			break
		}
		n++
	}
	cpu := processCPU() - cpu0
	b.StopTimer()
	sub.Close()
	if n != b.N {
		b.Fatalf("received %d events, want %d", n, b.N)
	}
	b.ReportMetric(float64(cpu.Microseconds())/float64(n), "cpu-µs/event")
}

func dialB(b *testing.B, url string) *Conn {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := Dial(ctx, url, DefaultOptions())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { c.Close() })
	return c
}

// processCPU returns the user+system CPU time the process has used.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
