package trusted

import "testing"

func TestSettingsValidate(t *testing.T) {
	if err := DefaultSettings().Validate(); err != nil {
		t.Fatalf("defaults: %v", err)
	}
	s := DefaultSettings()
	s.Lookback, s.MaxEventsPerCycle = 0, 0
	want := "lookback: must be > 0, got \"0s\"\nmax_events_per_cycle: must be > 0, got \"0\""
	if err := s.Validate(); err == nil || err.Error() != want {
		t.Fatalf("Validate() = %v, want %q", err, want)
	}
}
