package relay

import (
	"testing"
)

func TestParseLimits(t *testing.T) {
	for _, tc := range []struct {
		name string
		doc  string
		want Limits
		err  bool
	}{
		{"full", `{"name":"r","limitation":{"max_subscriptions":300,"max_filters":100,"max_limit":5000,"max_message_length":131072,"auth_required":false}}`,
			Limits{MaxSubscriptions: 300, MaxFilters: 100, MaxLimit: 5000, MaxMessageLength: 131072}, false},
		{"no limitation", `{"name":"r","supported_nips":[1,11,77]}`, Limits{}, false},
		{"null limitation", `{"limitation":null}`, Limits{}, false},
		{"partial", `{"limitation":{"max_limit":500}}`, Limits{MaxLimit: 500}, false},
		{"strings and floats", `{"limitation":{"max_subscriptions":"20","max_filters":10.0,"max_limit":" 500 "}}`,
			Limits{MaxSubscriptions: 20, MaxFilters: 10, MaxLimit: 500}, false},
		{"negative and zero", `{"limitation":{"max_subscriptions":-1,"max_filters":0}}`, Limits{}, false},
		{"garbage values", `{"limitation":{"max_subscriptions":true,"max_filters":[1],"max_limit":"NaN","max_message_length":{}}}`, Limits{}, false},
		{"huge", `{"limitation":{"max_message_length":1e12}}`, Limits{MaxMessageLength: 1<<31 - 1}, false},
		{"not json", `<html>`, Limits{}, true},
		{"limitation not an object", `{"limitation":5}`, Limits{}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseLimits([]byte(tc.doc))
			if (err != nil) != tc.err {
				t.Fatalf("err = %v, want error %v", err, tc.err)
			}
			if got != tc.want {
				t.Fatalf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

func FuzzParseLimits(f *testing.F) {
	f.Add([]byte(`{"limitation":{"max_subscriptions":300,"max_filters":100,"max_limit":5000,"max_message_length":131072}}`))
	f.Add([]byte(`{"limitation":{"max_subscriptions":"1e400"}}`))
	f.Add([]byte(`{"limitation":{"max_limit":-5e-324}}`))
	f.Fuzz(func(t *testing.T, doc []byte) {
		l, err := ParseLimits(doc)
		if err != nil && l != (Limits{}) {
			t.Fatalf("error %v with non-zero limits %+v", err, l)
		}
		for _, v := range []int{l.MaxSubscriptions, l.MaxFilters, l.MaxLimit, l.MaxMessageLength} {
			if v < 0 || v > 1<<31-1 {
				t.Fatalf("limit out of range: %+v", l)
			}
		}
	})
}
