package publish

import (
	"errors"
	"testing"
)

func TestResultAsError(t *testing.T) {
	tests := []struct {
		res     Result
		wantNil bool
		is      error
		text    string
	}{
		{Result{ID: "a", Outcome: Accepted}, true, nil, ""},
		{Result{ID: "a", Outcome: Duplicate, Reason: "duplicate: have it"}, true, nil, ""},
		{Result{ID: "a", Outcome: Rejected, Reason: "blocked: no"}, false, ErrRejected, "event a: rejected by the own relay: blocked: no"},
		{Result{ID: "a", Outcome: Dropped, Err: ErrStopped}, false, ErrStopped, "publisher stopped"},
	}
	for _, tt := range tests {
		t.Run(tt.res.Outcome.String(), func(t *testing.T) {
			err := tt.res.AsError()
			if tt.wantNil {
				if err != nil {
					t.Fatalf("got %v, want nil", err)
				}
				if !tt.res.Present() {
					t.Fatal("not Present")
				}
				return
			}
			if !errors.Is(err, tt.is) || err.Error() != tt.text {
				t.Fatalf("got %v, want %q wrapping %v", err, tt.text, tt.is)
			}
			if tt.res.Present() {
				t.Fatal("Present")
			}
		})
	}
}
