package reposync

import (
	"errors"
	"testing"
	"time"

	"github.com/grasp-sync/grasp-sync/internal/setting"
)

func TestSettingsValidate(t *testing.T) {
	if err := DefaultSettings().Validate(); err != nil {
		t.Fatalf("defaults: %v", err)
	}
	for _, tc := range []struct {
		mut  func(*Settings)
		want string
	}{
		{func(s *Settings) { s.SelfKinds = nil }, `self_kinds: must not be empty, got ""`},
		{func(s *Settings) { s.SelfKinds = []int{1, 70000} }, `self_kinds[1]: must be in 0..65535, got "70000"`},
		{func(s *Settings) { s.BatchQuiet = -1 }, `batch_quiet: must be >= 0, got "-1ns"`},
		{func(s *Settings) { s.HistoricRetryMax = time.Second }, `historic_retry_max: must be >= historic_retry_base (30s), got "1s"`},
		{func(s *Settings) { s.FullResyncMax = time.Hour }, `full_resync_max: must be >= full_resync_min (23h), got "1h"`},
		{func(s *Settings) { s.HistoricMaxBytes = -1 }, `historic_max_bytes: must be >= 0, got "-1"`},
		{func(s *Settings) { s.PageSize = 0 }, `page_size: must be > 0, got "0"`},
	} {
		s := DefaultSettings()
		tc.mut(&s)
		if err := s.Validate(); err == nil || err.Error() != tc.want || !errors.Is(err, setting.ErrInvalid) {
			t.Errorf("Validate() = %v, want %q", err, tc.want)
		}
	}
}
