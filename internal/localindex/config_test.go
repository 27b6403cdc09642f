package localindex

import (
	"strings"
	"testing"
)

func TestConfigValidate(t *testing.T) {
	if err := DefaultConfig().Validate(); err != nil {
		t.Fatalf("default: %v", err)
	}
	if got := DefaultConfig().Options(); got != DefaultOptions() {
		t.Fatalf("default options %+v, want %+v", got, DefaultOptions())
	}
	for _, n := range []int{0, -1, MaxEventsLimit + 1} {
		err := Config{MaxLocalIndexEvents: n}.Validate()
		if err == nil || !strings.Contains(err.Error(), "max_local_index_events") {
			t.Errorf("%d: err %v, want one naming max_local_index_events", n, err)
		}
	}
	c := Config{MaxLocalIndexEvents: MaxEventsLimit}
	if err := c.Validate(); err != nil {
		t.Fatalf("%d: %v", MaxEventsLimit, err)
	}
	if err := c.Options().Validate(); err != nil {
		t.Fatalf("options of the largest setting: %v", err)
	}
}
