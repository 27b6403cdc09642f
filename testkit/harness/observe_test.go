package harness_test

import (
	"strings"
	"testing"
	"time"

	"github.com/nbd-wtf/go-nostr"

	"github.com/grasp-sync/grasp-sync/testkit"
	"github.com/grasp-sync/grasp-sync/testkit/harness"
	"github.com/grasp-sync/grasp-sync/testkit/signed"
)

func TestHarnessObservation(t *testing.T) {
	ctx := testCtx(t)
	r := harness.Start(t, harness.RelayOptions{})
	start := time.Now()

	c1 := dial(t, ctx, r.URL())
	for _, sub := range []string{"a", "b", "c"} {
		req(t, ctx, c1, sub, nostr.Filter{})
	}
	if err := c1.CloseSub(ctx, "b"); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, waitTimeout, "the close", func() bool { return r.Stats().Closes == 1 })
	st := r.Stats()
	if st.Reqs != 3 || st.OpenSubs != 2 || st.PeakSubs != 3 || st.PeakSubsPerConn != 3 || st.Connections != 1 {
		t.Fatalf("after conn 1: %+v", st)
	}

	c2 := dial(t, ctx, r.URL())
	req(t, ctx, c2, "x", nostr.Filter{})
	req(t, ctx, c2, "y", nostr.Filter{})
	st = r.Stats()
	if st.OpenSubs != 4 || st.PeakSubs != 4 || st.PeakSubsPerConn != 3 || st.OpenConnections != 2 {
		t.Fatalf("after conn 2: %+v", st)
	}
	if subs := r.OpenSubscriptions(); len(subs[1]) != 2 || len(subs[2]) != 2 {
		t.Fatalf("OpenSubscriptions = %v", subs)
	}

	// a REQ the relay CLOSEs does not stay open
	r.SetFaults(harness.Faults{ReqClosed: "rate-limited: no"})
	if res, err := c2.Req(ctx, "z", nostr.Filter{}); err != nil || res.Closed == "" {
		t.Fatalf("REQ z: %+v %v", res, err)
	}
	r.SetFaults(harness.Faults{})
	if st := r.Stats(); st.OpenSubs != 4 || st.Sent["CLOSED"] != 1 {
		t.Fatalf("after CLOSED: %+v", st)
	}

	evs := notes(signed.NewKey(), 2, 1_700_000_000)
	if err := harness.Publish(ctx, r.URL(), evs...); err != nil {
		t.Fatal(err)
	}
	c1.Close()
	testkit.WaitFor(t, waitTimeout, "one open connection", func() bool { return r.Stats().OpenConnections == 1 })
	st = r.Stats()
	if st.Events != 2 || st.OpenSubs != 2 || st.Connections != 3 || st.Sent["OK"] != 2 || st.Sent["EOSE"] != 5 {
		t.Fatalf("after publish and close: %+v", st)
	}

	// "nothing was received during [t1, t2]"
	t1 := time.Now()
	t2 := time.Now()
	req(t, ctx, c2, "late", nostr.Filter{Kinds: []int{7}})
	got := r.Received(t1)
	if len(got) != 1 || got[0].Type != "REQ" || got[0].SubID != "late" || got[0].Time.Before(t2) || !strings.Contains(got[0].Raw, `"late"`) {
		t.Fatalf("Received(t1) = %+v", got)
	}

	all := r.Received(start)
	var connects, disconnects, eventIDs int
	for _, m := range all {
		switch m.Type {
		case harness.TypeConnect:
			connects++
		case harness.TypeDisconnect:
			disconnects++
		case "EVENT":
			if m.EventID == evs[0].ID || m.EventID == evs[1].ID {
				eventIDs++
			}
		}
	}
	if connects != 3 || disconnects != 2 || eventIDs != 2 {
		t.Fatalf("log: %d connects, %d disconnects, %d event ids", connects, disconnects, eventIDs)
	}
	for i := 1; i < len(all); i++ {
		if all[i].Time.Before(all[i-1].Time) {
			t.Fatal("log not in time order")
		}
	}
	sent := r.Sent(t1)
	if len(sent) != 1 || sent[0].Type != "EOSE" || sent[0].SubID != "late" {
		t.Fatalf("Sent(t1) = %+v", sent)
	}

	r.ResetStats()
	st = r.Stats()
	if st.Reqs != 0 || st.Connections != 0 || st.OpenSubs != 3 || st.PeakSubs != 3 || st.OpenConnections != 1 || len(r.Received(start)) != 0 {
		t.Fatalf("after ResetStats: %+v", st)
	}
}
