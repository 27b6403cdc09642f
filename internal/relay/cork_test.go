package relay

import (
	"bytes"
	"io"
	"net"
	"testing"
	"time"
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

// countingConn records the writes that reach the socket.
type countingConn struct {
	net.Conn
	writes [][]byte
}

func (c *countingConn) Write(p []byte) (int, error) {
	c.writes = append(c.writes, bytes.Clone(p))
	return len(p), nil
}

func (c *countingConn) SetWriteDeadline(time.Time) error { return nil }

// The frames of one message (the websocket writes them 4 kB at a time)
// reach the socket in one write; a connection that does not coalesce
// holds no buffer after; while corked, the message waits for Uncork.
func TestMessageGoesOutInOneWrite(t *testing.T) {
	sock := &countingConn{}
	c := &corkConn{Conn: sock, timeout: time.Second}
	chunk := bytes.Repeat([]byte("x"), 4096)
	c.beginMsg()
	for range 3 {
		if _, err := c.Write(chunk); err != nil {
			t.Fatal(err)
		}
	}
	if len(sock.writes) != 0 {
		t.Fatalf("%d writes before the message ended", len(sock.writes))
	}
	if err := c.endMsg(); err != nil {
		t.Fatal(err)
	}
	if len(sock.writes) != 1 || len(sock.writes[0]) != 3*4096 {
		t.Fatalf("%d writes, want one of %d bytes", len(sock.writes), 3*4096)
	}
	if c.buf != nil {
		t.Fatal("a connection that does not coalesce kept its write buffer")
	}
	// a control frame between messages goes straight out
	if _, err := c.Write([]byte("ping")); err != nil || len(sock.writes) != 2 {
		t.Fatalf("write outside a message: %v, %d writes", err, len(sock.writes))
	}

	cc := &corkConn{Conn: sock, coalesce: true, timeout: time.Second}
	sock.writes = nil
	cc.cork()
	cc.beginMsg()
	_, _ = cc.Write(chunk)
	if err := cc.endMsg(); err != nil || len(sock.writes) != 0 {
		t.Fatalf("a message on a corked connection went out before Uncork (%v)", err)
	}
	if err := cc.uncork(); err != nil || len(sock.writes) != 1 {
		t.Fatalf("uncork: %v, %d writes, want 1", err, len(sock.writes))
	}
}
