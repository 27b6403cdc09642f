package relay

// NegReply is one message a relay sent for a negentropy session (NIP-77).
// Exactly one field is set.
type NegReply struct {
	// Msg is the hex payload of a NEG-MSG.
	Msg string
	// Err is the reason of a NEG-ERR (or khatru's non-standard NEG-ERROR).
	Err string
	// Notice is a NOTICE the relay sent while the session was open; relays
	// that do not speak NIP-77 answer NEG-OPEN with a NOTICE.
	Notice string
}
