package relay

import (
	"bytes"
	"net"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/grasp-sync/grasp-sync/internal/testkit"
)

// readCounter counts the reads that reach the socket.
type readCounter struct {
	net.Conn
	reads int
}

func (c *readCounter) Read(p []byte) (int, error) {
	c.reads++
	return c.Conn.Read(p)
}

// tcpPair is a connected pair of loopback TCP sockets.
func tcpPair(t *testing.T) (client, server *net.TCPConn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, _ := ln.Accept()
		accepted <- c
	}()
	a, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	b := <-accepted
	if b == nil {
		t.Fatal("accept failed")
	}
	t.Cleanup(func() { _ = a.Close(); _ = b.Close() })
	return a.(*net.TCPConn), b.(*net.TCPConn)
}

// waiting is how many bytes the socket holds unread (FIONREAD).
func waiting(t *testing.T, c *net.TCPConn) int {
	t.Helper()
	rc, err := c.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var n int32
	var errno syscall.Errno
	if err := rc.Control(func(fd uintptr) {
		_, _, errno = syscall.Syscall(syscall.SYS_IOCTL, fd, syscall.TIOCINQ, uintptr(unsafe.Pointer(&n)))
	}); err != nil {
		t.Fatal(err)
	}
	if errno != 0 {
		t.Fatal(errno)
	}
	return int(n)
}

// After a read that emptied the socket, the next one waits ReadPause, and
// what the relay sent meanwhile is read with one system call. A read that
// filled the read-ahead buffer left more waiting: the next does not wait.
func TestReadPauseReadsABurstAtOnce(t *testing.T) {
	a, b := tcpPair(t)
	// Room for the large write below, whatever the kernel's default.
	if err := a.SetReadBuffer(1 << 20); err != nil {
		t.Fatal(err)
	}
	counted := &readCounter{Conn: a}
	paused := make(chan time.Duration, 1)
	resume := make(chan struct{})
	resumed := false
	defer func() {
		if !resumed {
			close(resume) // a failure below leaves no reader blocked
		}
	}()
	c := &corkConn{Conn: counted, pause: time.Hour, sleep: func(d time.Duration) {
		paused <- d
		<-resume
	}}
	p := make([]byte, 4096)

	if _, err := b.Write([]byte("a")); err != nil {
		t.Fatal(err)
	}
	if n, err := c.Read(p); err != nil || string(p[:n]) != "a" {
		t.Fatalf("first read = %q, %v; want \"a\" at once", p[:n], err)
	}
	got := make(chan string, 1)
	go func() {
		n, _ := c.Read(p)
		got <- string(p[:n])
	}()
	select {
	case d := <-paused:
		if d != time.Hour {
			t.Fatalf("paused %v, want ReadPause (1h)", d)
		}
	case s := <-got:
		t.Fatalf("read %q without pausing after a read that emptied the socket", s)
	case <-time.After(10 * time.Second):
		t.Fatal("the read neither paused nor returned")
	}
	for _, s := range []string{"b", "c", "d"} {
		if _, err := b.Write([]byte(s)); err != nil {
			t.Fatal(err)
		}
	}
	testkit.WaitFor(t, 10*time.Second, "the three writes to arrive", func() bool { return waiting(t, a) == 3 })
	close(resume)
	resumed = true
	if s := <-got; s != "bcd" {
		t.Fatalf("read %q after the pause, want the burst \"bcd\" at once", s)
	}
	if counted.reads != 2 {
		t.Fatalf("%d reads reached the socket, want 2", counted.reads)
	}

	// The burst emptied the socket: the next read pauses once. It fills
	// the read-ahead buffer, so the one after takes the rest at once.
	pauses := 0
	c.sleep = func(time.Duration) { pauses++ }
	big := bytes.Repeat([]byte("x"), readAhead+10)
	go func() { _, _ = b.Write(big) }()
	testkit.WaitFor(t, 10*time.Second, "a read-ahead's worth of the large write to arrive", func() bool { return waiting(t, a) >= readAhead })
	var read []byte
	for len(read) < len(big) {
		n, err := c.Read(p)
		if err != nil {
			t.Fatal(err)
		}
		read = append(read, p[:n]...)
	}
	if !bytes.Equal(read, big) {
		t.Fatal("large write read back wrong")
	}
	if pauses != 1 {
		t.Fatalf("%d pauses reading a write larger than the read-ahead buffer, want 1 (before it, none after a full read)", pauses)
	}
}

// A read that fails is followed by no pause: a closed socket's error is
// reported at once, not a pause later (a close is not delayed).
func TestNoReadPauseAfterAnError(t *testing.T) {
	a, b := tcpPair(t)
	c := &corkConn{Conn: a, pause: time.Hour, sleep: func(time.Duration) { t.Error("paused after a failed read") }}
	_ = b.Close()
	p := make([]byte, 16)
	if _, err := c.Read(p); err == nil {
		t.Fatal("read from a closed peer succeeded")
	}
	if _, err := c.Read(p); err == nil {
		t.Fatal("second read from a closed peer succeeded")
	}
}

// Without ReadPause every read goes to the socket at once.
func TestNoReadPause(t *testing.T) {
	a, b := tcpPair(t)
	c := &corkConn{Conn: a, sleep: func(time.Duration) { t.Error("paused with ReadPause 0") }}
	p := make([]byte, 16)
	for _, s := range []string{"a", "b"} {
		if _, err := b.Write([]byte(s)); err != nil {
			t.Fatal(err)
		}
		if n, err := c.Read(p); err != nil || string(p[:n]) != s {
			t.Fatalf("read %q, %v; want %q", p[:n], err, s)
		}
	}
}
