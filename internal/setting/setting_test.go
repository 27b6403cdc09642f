package setting

import (
	"errors"
	"testing"
	"time"
)

var errEngine = errors.New("invalid engine config")

func TestChecksRenderLikeTheConfiguration(t *testing.T) {
	v := Checks{Kind: errEngine}
	v.Positive("tick", 0)
	v.NonNegative("delay", -time.Millisecond)
	v.PositiveInt("window", -1)
	v.NonNegativeInt("queue_bytes", 0) // fine
	v.Compare("max", 2*time.Second, ">=", "base", 5*time.Second)
	v.Compare("pong", 90*time.Second, ">", "ping", 30*time.Second) // fine
	v.Fail("jitter", "must be in [0, 1)", 1.5)
	err := v.Err()
	want := `tick: must be > 0, got "0s"` + "\n" +
		`delay: must be >= 0, got "-1ms"` + "\n" +
		`window: must be > 0, got "-1"` + "\n" +
		`max: must be >= base (5s), got "2s"` + "\n" +
		`jitter: must be in [0, 1), got "1.5"`
	if err == nil || err.Error() != want {
		t.Fatalf("got %v\nwant %s", err, want)
	}
	if !errors.Is(err, ErrInvalid) || !errors.Is(err, errEngine) {
		t.Fatal("errors.Is does not match ErrInvalid and the Kind")
	}
	if (&Checks{}).Err() != nil {
		t.Fatal("no problem, yet an error")
	}
}

func TestWithinQualifiesFieldAndPeer(t *testing.T) {
	v := Checks{}
	v.Positive("tick", 0)
	v.Compare("retry_max", time.Millisecond, ">=", "retry_base", time.Second)
	other := errors.New("not a setting error")
	v.Add(other)
	inner := Within("inner", v.Err())
	var outer Checks
	outer.Add(Within("outer", inner))
	err := outer.Err()
	want := `outer.inner.tick: must be > 0, got "0s"` + "\n" +
		`outer.inner.retry_max: must be >= outer.inner.retry_base (1s), got "1ms"` + "\n" +
		`not a setting error`
	if err == nil || err.Error() != want {
		t.Fatalf("got %v\nwant %s", err, want)
	}
	var e *Error
	if !errors.As(err, &e) || e.Field != "outer.inner.tick" {
		t.Fatalf("errors.As: %+v", e)
	}
	if !errors.Is(err, other) {
		t.Fatal("a foreign error was lost")
	}
	if Within("x", nil) != nil {
		t.Fatal("Within(nil) is not nil")
	}
}

func TestFormat(t *testing.T) {
	for v, want := range map[any]string{
		time.Hour: "1h", 15 * time.Minute: "15m", 500 * time.Millisecond: "500ms", 90 * time.Second: "1m30s",
		3: "3", int64(4): "4", 0.25: "0.25", true: "true", "s": "s",
	} {
		if got := Format(v); got != want {
			t.Errorf("Format(%v) = %q, want %q", v, got, want)
		}
	}
	if got := Format([]time.Duration{time.Second, time.Minute}); got != "1s,1m" {
		t.Errorf("durations: %q", got)
	}
	if got := Format([]int{1, 2}); got != "1,2" {
		t.Errorf("ints: %q", got)
	}
}

func TestDetailNamesFlagAndEnvironment(t *testing.T) {
	v := Checks{}
	v.PositiveInt("page_size", 0)
	v.Fail("own", "is required", "")
	err := Within("sync", v.Err())
	list := flatten(err)
	list[0].(*Error).Flag, list[0].(*Error).Env = "sync.page-size", "GRASP_SYNC_SYNC_PAGE_SIZE"
	other := errors.New("not a setting error")
	got := Detail(errors.Join(errors.Join(list...), other))
	want := `sync.page_size (--sync.page-size, GRASP_SYNC_SYNC_PAGE_SIZE): must be > 0, got "0"` + "\n" +
		`sync.own: is required, got ""` + "\n" +
		`not a setting error`
	if got != want {
		t.Fatalf("got\n%s\nwant\n%s", got, want)
	}
	if list[0].Error() != `sync.page_size: must be > 0, got "0"` {
		t.Fatalf("Error() changed: %s", list[0])
	}
	if Detail(nil) != "" {
		t.Fatal("Detail(nil) is not empty")
	}
}
