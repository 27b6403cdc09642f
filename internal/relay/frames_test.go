package relay

import (
	"strings"
	"testing"

	"github.com/nbd-wtf/go-nostr"
	"github.com/nbd-wtf/go-nostr/nip77"
	"go.uber.org/zap"
)

var frameSeeds = []string{
	`["OK","` + strings.Repeat("a", 64) + `",true,""]`,
	`["OK","` + strings.Repeat("a", 64) + `",false,"duplicate: have it"]`,
	` [ "OK" , "abc" , true , "x" ] `,
	`["OK","abc",true,"x",1]`,
	`["OK","a\"bc",true,"x"]`,
	`["OK","abc",true,"a \u00e9 \"q\""]`,
	`["OK","abc","true","x"]`,
	`["OK","abc",truex,"x"]`,
	`["OK","abc",true]`,
	`["OK","abc",true,"x"`,
	`["OK","abc",true,"x"]]`,
	`["NEG-MSG","n1","6101ffffffffffffffffff7f0000"]`,
	`["NEG-MSG","n1","61",2]`,
	`["NEG-MSG","n\"1","61"]`,
	`["NEG-MSG","n1"]`,
	`["NEG-MSG", "n1" ,"61"  ]` + "\n",
	`["NEG-MSG","n1",61]`,
}

// checkFrames: whatever okFrame and negMsgFrame split means what go-nostr's
// decoders read from the same frame.
func checkFrames(t *testing.T, frame string) {
	if id, ok, reason, fine := okFrame([]byte(frame)); fine {
		var env nostr.OKEnvelope
		if err := env.FromJSON(frame); err != nil {
			t.Fatalf("%q: split by okFrame, refused by go-nostr: %v", frame, err)
		}
		if string(id) != env.EventID || ok != env.OK || string(reason) != env.Reason {
			t.Fatalf("%q: okFrame %q %v %q, go-nostr %+v", frame, id, ok, reason, env)
		}
	}
	if sub, msg, fine := negMsgFrame([]byte(frame)); fine {
		var env nip77.MessageEnvelope
		if err := env.FromJSON(frame); err != nil {
			t.Fatalf("%q: split by negMsgFrame, refused by go-nostr: %v", frame, err)
		}
		if string(sub) != env.SubscriptionID || string(msg) != env.Message {
			t.Fatalf("%q: negMsgFrame %q %q, go-nostr %+v", frame, sub, msg, env)
		}
	}
}

func TestFramesAgreeWithGoNostr(t *testing.T) {
	split := 0
	for _, f := range frameSeeds {
		checkFrames(t, f)
		if _, _, _, ok := okFrame([]byte(f)); ok {
			split++
		}
		if _, _, ok := negMsgFrame([]byte(f)); ok {
			split++
		}
	}
	if split != 5 {
		t.Fatalf("%d seed frames split by hand, want 5", split)
	}
}

func FuzzFrames(f *testing.F) {
	for _, s := range frameSeeds {
		f.Add(s)
	}
	f.Fuzz(checkFrames)
}

// TestOKFrameDelivered: an OK split by hand reaches OnOK and the waiter
// with the id it was sent with, and one for an id nobody waits for
// reaches OnOK only.
func TestOKFrameDelivered(t *testing.T) {
	var frames []string
	c, _, _, okCh := fuzzConn(t, zap.NewNop(), &frames)
	var seen []string
	c.opts.OnOK = func(id string, ok bool, reason string) { seen = append(seen, id+" "+reason) }
	id := strings.Repeat("a", 64)
	c.handle([]byte(`["OK","` + strings.Repeat("b", 64) + `",true,""]`))
	c.handle([]byte(`["OK","` + id + `",false,"blocked: no"]`))
	select {
	case r := <-okCh:
		if r.OK || r.Reason != "blocked: no" || r.Err != nil {
			t.Fatalf("OK result %+v", r)
		}
	default:
		t.Fatal("the waiter got no OK")
	}
	if len(seen) != 2 || seen[0] != strings.Repeat("b", 64)+" " || seen[1] != id+" blocked: no" {
		t.Fatalf("OnOK saw %q", seen)
	}
	if len(c.oks) != 0 {
		t.Fatalf("%d OK waiters left", len(c.oks))
	}
}
