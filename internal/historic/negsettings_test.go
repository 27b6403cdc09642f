package historic

import "testing"

// The negentropy section's checks include the sessions' own (neg.Settings).
func TestNegSettingsValidate(t *testing.T) {
	if err := DefaultNegSettings().Validate(); err != nil {
		t.Fatalf("defaults: %v", err)
	}
	s := DefaultNegSettings()
	s.FrameLimit, s.ClaimWait = 100, 0
	want := "frame_limit: must be >= 4096, got \"100\"\nclaim_wait: must be > 0, got \"0s\""
	if err := s.Validate(); err == nil || err.Error() != want {
		t.Fatalf("Validate() = %v, want %q", err, want)
	}
	o := NegConfig{NegSettings: s, MaxInboundHex: 1234}.SessionOptions()
	if o.FrameLimit != 100 || o.MaxInboundHex != 1234 || o.MaxRounds == 0 {
		t.Fatalf("SessionOptions() = %+v", o)
	}
}
