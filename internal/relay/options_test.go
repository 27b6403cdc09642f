package relay

import (
	"context"
	"strings"
	"testing"
)

// TestDialRequiresBounds: Dial applies no defaults of its own; a missing
// bound is refused before any connection, naming the field.
func TestDialRequiresBounds(t *testing.T) {
	for _, tc := range []struct {
		field string
		clear func(*Options)
	}{
		{"MaxMessageBytes", func(o *Options) { o.MaxMessageBytes = 0 }},
		{"WriteTimeout", func(o *Options) { o.WriteTimeout = 0 }},
		{"PingInterval", func(o *Options) { o.PingInterval = 0 }},
		{"PongTimeout", func(o *Options) { o.PongTimeout = 0 }},
		{"SubscriptionBuffer", func(o *Options) { o.SubscriptionBuffer = 0 }},
	} {
		opts := DefaultOptions()
		tc.clear(&opts)
		_, err := Dial(context.Background(), "ws://127.0.0.1:1", opts)
		if err == nil || !strings.Contains(err.Error(), tc.field) {
			t.Errorf("zero %s: Dial error %v, want one naming the field", tc.field, err)
		}
	}
}
