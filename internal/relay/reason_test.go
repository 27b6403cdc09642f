package relay

import "testing"

func TestReasonPrefix(t *testing.T) {
	for reason, want := range map[string]string{
		"duplicate: already have this event":                ReasonDuplicate,
		"rate-limited: slow down":                           ReasonRateLimited,
		"auth-required: authenticate first":                 ReasonAuthRequired,
		"blocked: too many query results":                   ReasonBlocked,
		"invalid:":                                          ReasonInvalid,
		"error: could not connect to database":              ReasonError,
		"restricted: not allowed":                           ReasonRestricted,
		"pow: difficulty 20 required":                       ReasonPoW,
		"mute: no one was listening":                        ReasonMute,
		"purgatory: won't be served until git data arrives": ReasonPurgatory,
		"":                                      "",
		"duplicate":                             "",
		"slow down: please":                     "",
		"Blocked: case matters":                 "",
		"something went wrong, duplicate: here": "",
	} {
		if got := ReasonPrefix(reason); got != want {
			t.Errorf("ReasonPrefix(%q) = %q, want %q", reason, got, want)
		}
	}
}
