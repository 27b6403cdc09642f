package relay

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
)

// Limits are the limits a relay announces in the `limitation` object of its
// NIP-11 information document. Zero means "not announced".
type Limits struct {
	// MaxSubscriptions is the number of concurrent subscriptions allowed
	// per connection.
	MaxSubscriptions int `json:"max_subscriptions,omitempty"`
	// MaxFilters is the number of filters allowed in one REQ.
	MaxFilters int `json:"max_filters,omitempty"`
	// MaxLimit is the largest `limit` the relay honours in a filter.
	MaxLimit int `json:"max_limit,omitempty"`
	// MaxMessageLength is the largest websocket message the relay accepts,
	// in bytes.
	MaxMessageLength int `json:"max_message_length,omitempty"`
	// MaxEventTags is the most tags an event may carry.
	MaxEventTags int `json:"max_event_tags,omitempty"`
	// MaxContentLength is the longest content an event may carry.
	MaxContentLength int `json:"max_content_length,omitempty"`
	// CreatedAtLowerLimit, in seconds, refuses events older than that.
	CreatedAtLowerLimit int `json:"created_at_lower_limit,omitempty"`
	// MaxTagValues is the number of tag values one filter may carry. NIP-11
	// has no such field: it is only ever learned from a refusal (eventstore's
	// "too many tag values").
	MaxTagValues int `json:"max_tag_values,omitempty"`
}

// CommonCaps are result sizes at which relays in the wild cut a REQ's
// results or a negentropy set silently (strfry's and khatru's 500,
// ngit-relay's 250 above a limit of 1000): a set of exactly that size may
// be missing events.
var CommonCaps = []int{250, 500, 1000}

// ParseLimits extracts Limits from a NIP-11 relay information document
// (the JSON body served for Accept: application/nostr+json). A document
// without a limitation object gives zero Limits; values that are not
// positive integers are treated as not announced.
func ParseLimits(doc []byte) (Limits, error) {
	var d struct {
		Limitation map[string]json.RawMessage `json:"limitation"`
	}
	if err := json.Unmarshal(doc, &d); err != nil {
		return Limits{}, fmt.Errorf("parse NIP-11 document: %w", err)
	}
	return Limits{
		MaxSubscriptions:    positiveInt(d.Limitation["max_subscriptions"]),
		MaxFilters:          positiveInt(d.Limitation["max_filters"]),
		MaxLimit:            positiveInt(d.Limitation["max_limit"]),
		MaxMessageLength:    positiveInt(d.Limitation["max_message_length"]),
		MaxEventTags:        positiveInt(d.Limitation["max_event_tags"]),
		MaxContentLength:    positiveInt(d.Limitation["max_content_length"]),
		CreatedAtLowerLimit: positiveInt(d.Limitation["created_at_lower_limit"]),
	}, nil
}

// positiveInt decodes a JSON number into a positive int, 0 otherwise.
// Relays publish odd values ("500", 1e6, -1); a limit we cannot read is a
// limit we do not know, not a reason to reject the document.
func positiveInt(raw json.RawMessage) int {
	var f float64
	if json.Unmarshal(raw, &f) != nil {
		var s string
		if json.Unmarshal(raw, &s) != nil {
			return 0
		}
		var err error
		if f, err = strconv.ParseFloat(strings.TrimSpace(s), 64); err != nil {
			return 0
		}
	}
	switch {
	case f != f: // NaN from a string such as "NaN"
		return 0
	case f >= maxInt32:
		return maxInt32
	case f < 1:
		return 0
	}
	return int(f)
}

const maxInt32 = 1<<31 - 1

// FetchLimits reads the NIP-11 information document of the relay at wsURL
// with client (http.DefaultClient when nil) and returns its limitation.
func FetchLimits(ctx context.Context, client *http.Client, wsURL string) (Limits, error) {
	doc, err := FetchInfo(ctx, client, wsURL)
	if err != nil {
		return Limits{}, err
	}
	return ParseLimits(doc)
}

// FetchInfo returns the NIP-11 information document of the relay at wsURL
// (at most 256 KiB), fetched with client (http.DefaultClient when nil).
func FetchInfo(ctx context.Context, client *http.Client, wsURL string) ([]byte, error) {
	if client == nil {
		client = http.DefaultClient
	}
	httpURL := "http" + strings.TrimPrefix(wsURL, "ws")
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, httpURL, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/nostr+json")
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("NIP-11: HTTP %d", resp.StatusCode)
	}
	return io.ReadAll(io.LimitReader(resp.Body, 256<<10))
}
