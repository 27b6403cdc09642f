package relay

import (
	"bytes"
	"io"
	"net"
	"testing"
)

// A read takes what is waiting, up to readAhead, and hands it out in the
// sizes asked for; the buffer goes back once drained, and the socket's
// error comes after the data.
func TestReadAheadHandsOutWhatWasRead(t *testing.T) {
	a, b := net.Pipe()
	c := &corkConn{Conn: a}
	want := bytes.Repeat([]byte("0123456789"), 1000)
	go func() {
		_, _ = b.Write(want)
		_ = b.Close()
	}()
	var got []byte
	p := make([]byte, 4096)
	for {
		n, err := c.Read(p)
		got = append(got, p[:n]...)
		if n > 0 && c.r != c.w && c.rbuf == nil {
			t.Fatal("bytes read and not handed out were dropped")
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("read %d bytes, want %d in order", len(got), len(want))
	}
	if c.rbuf != nil {
		t.Fatal("drained connection still holds its read-ahead buffer")
	}
}
