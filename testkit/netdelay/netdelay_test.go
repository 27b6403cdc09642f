package netdelay

import (
	"bytes"
	"crypto/rand"
	"io"
	"net"
	"testing"
	"time"
)

// echo serves one echoing listener on 127.0.0.1 until the test ends.
func echo(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { defer c.Close(); io.Copy(c, c) }()
		}
	}()
	return ln.Addr().String()
}

// A round trip through the proxy takes at least twice the delay, and 4
// MiB come back whole and in order; the end of the client's writes
// reaches the server (which then ends the echo).
func TestRoundTripDelayedAndWhole(t *testing.T) {
	const delay = 40 * time.Millisecond
	p, err := Start(echo(t), delay)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()

	start := time.Now()
	if _, err := c.Write([]byte("ping")); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, 4)
	if _, err := io.ReadFull(c, got); err != nil || string(got) != "ping" {
		t.Fatalf("echo %q, %v", got, err)
	}
	if rtt := time.Since(start); rtt < 2*delay {
		t.Fatalf("round trip %s, want at least %s", rtt, 2*delay)
	}

	want := make([]byte, 4<<20)
	rand.Read(want)
	go func() {
		c.Write(want)
		c.(*net.TCPConn).CloseWrite()
	}()
	back, err := io.ReadAll(c)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(back, want) {
		t.Fatalf("%d bytes back, not the %d sent", len(back), len(want))
	}
}

// Close cuts open connections and refuses new ones; a target that is not
// listening closes the client's connection.
func TestCloseAndDeadTarget(t *testing.T) {
	p, err := Start(echo(t), time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	c.Write([]byte("x"))
	io.ReadFull(c, make([]byte, 1))
	p.Close()
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Read(make([]byte, 1)); err == nil {
		t.Fatal("connection open after Close")
	}
	if _, err := net.Dial("tcp", p.Addr()); err == nil {
		t.Fatal("dial after Close succeeded")
	}

	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	dead := ln.Addr().String()
	ln.Close()
	q, err := Start(dead, time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	d, err := net.Dial("tcp", q.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	d.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := d.Read(make([]byte, 1)); err == nil {
		t.Fatal("read through a proxy to a dead target succeeded")
	}
}

func TestNegativeDelay(t *testing.T) {
	if _, err := Start("127.0.0.1:1", -time.Second); err == nil {
		t.Fatal("negative delay accepted")
	}
}
