package repoindex

import "testing"

func TestBoundsValidate(t *testing.T) {
	if err := DefaultBounds().Validate(); err != nil {
		t.Fatalf("default bounds: %v", err)
	}
	b := DefaultBounds()
	b.MaxTrackedRelays = 0
	if err := b.Validate(); err == nil || err.Error() != `max_tracked_relays: must be > 0, got "0"` {
		t.Errorf("Bounds.Validate() = %v", err)
	}
}
