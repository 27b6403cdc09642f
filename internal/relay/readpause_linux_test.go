package relay

import (
	"bytes"
	"errors"
	"net"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/grasp-sync/grasp-sync/testkit"
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
	var n int32
	_, _, errno := syscall.Syscall(syscall.SYS_IOCTL, uintptr(socketFD(t, c)), syscall.TIOCINQ, uintptr(unsafe.Pointer(&n)))
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

// socketFD is c's file descriptor, for the checks below (c stays open
// for the test).
func socketFD(t *testing.T, c *net.TCPConn) int {
	t.Helper()
	rc, err := c.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	fd := -1
	if err := rc.Control(func(f uintptr) { fd = int(f) }); err != nil {
		t.Fatal(err)
	}
	return fd
}

// readableTo returns a check of whether epoll reports c readable now.
func readableTo(t *testing.T, c *net.TCPConn) func() bool {
	t.Helper()
	fd := socketFD(t, c)
	ep, err := syscall.EpollCreate1(syscall.EPOLL_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Close(ep) })
	ev := syscall.EpollEvent{Events: syscall.EPOLLIN, Fd: int32(fd)}
	if err := syscall.EpollCtl(ep, syscall.EPOLL_CTL_ADD, fd, &ev); err != nil {
		t.Fatal(err)
	}
	return func() bool {
		evs := make([]syscall.EpollEvent, 1)
		for {
			n, err := syscall.EpollWait(ep, evs, 0)
			if err == syscall.EINTR { // the runtime's preemption signal
				continue
			}
			if err != nil {
				t.Fatal(err)
			}
			return n > 0
		}
	}
}

// During a read pause the socket's receive low-water mark is raised, so
// what arrives meanwhile does not make the socket readable to epoll and
// wakes no thread; after the pause the mark is one byte again, the
// socket is readable, and the read takes what came.
func TestReadPauseRaisesLowWater(t *testing.T) {
	a, b := tcpPair(t)
	readable := readableTo(t, a)
	lowWater := func() int {
		n, err := syscall.GetsockoptInt(socketFD(t, a), syscall.SOL_SOCKET, syscall.SO_RCVLOWAT)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	set, mark := lowWaterFor(a)
	if set == nil {
		t.Fatal("no low-water mark setter for a TCP connection")
	}
	var markDuring int
	readableDuring, readableAfter, paused := true, false, false
	c := &corkConn{Conn: a, pause: time.Hour, lowMark: mark}
	c.lowWater = func(n int) error {
		if err := set(n); err != nil {
			return err
		}
		if n == 1 {
			readableAfter = readable()
		}
		return nil
	}
	c.sleep = func(time.Duration) {
		paused = true
		if _, err := b.Write([]byte("bcd")); err != nil {
			t.Fatal(err)
		}
		testkit.WaitFor(t, 10*time.Second, "the write to arrive", func() bool { return waiting(t, a) == 3 })
		markDuring = lowWater()
		readableDuring = readable()
	}
	p := make([]byte, 4096)
	if _, err := b.Write([]byte("a")); err != nil {
		t.Fatal(err)
	}
	if n, err := c.Read(p); err != nil || string(p[:n]) != "a" {
		t.Fatalf("first read = %q, %v; want \"a\" at once", p[:n], err)
	}
	if n, err := c.Read(p); err != nil || string(p[:n]) != "bcd" {
		t.Fatalf("read after the pause = %q, %v; want \"bcd\"", p[:n], err)
	}
	if !paused {
		t.Fatal("the second read did not pause")
	}
	if markDuring != mark {
		t.Errorf("low-water mark during the pause = %d, want %d", markDuring, mark)
	}
	if readableDuring {
		t.Error("epoll reported the socket readable during the pause with 3 bytes waiting")
	}
	if !readableAfter {
		t.Error("epoll did not report the socket readable once the mark was put back, with 3 bytes waiting")
	}
	if m := lowWater(); m != 1 {
		t.Errorf("low-water mark after the pause = %d, want 1", m)
	}
}

// A low-water mark that cannot be put back after a pause ends the
// connection's reads with that error: at the raised mark a lone message
// would wait for more.
func TestReadPauseLowWaterNotPutBack(t *testing.T) {
	a, b := tcpPair(t)
	c := &corkConn{Conn: a, pause: time.Millisecond, sleep: func(time.Duration) {}, lowMark: pauseLowWater, lowWater: func(n int) error {
		if n == 1 {
			return errors.New("refused")
		}
		return nil
	}}
	p := make([]byte, 16)
	for _, s := range []string{"a", "b"} {
		if _, err := b.Write([]byte(s)); err != nil {
			t.Fatal(err)
		}
	}
	testkit.WaitFor(t, 10*time.Second, "the writes to arrive", func() bool { return waiting(t, a) == 2 })
	if n, err := c.Read(p); err != nil || string(p[:n]) != "ab" {
		t.Fatalf("first read = %q, %v; want \"ab\"", p[:n], err)
	}
	// A read that went to the socket would wait for more: bounded, so it
	// fails rather than hangs.
	if err := a.SetReadDeadline(time.Now().Add(10 * time.Second)); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 2; i++ {
		if _, err := c.Read(p); err == nil || !strings.Contains(err.Error(), "low-water mark") {
			t.Fatalf("read %d after a mark that was not put back: %v, want the low-water mark's error", i+2, err)
		}
	}
}

// The mark a pause raises is at most a quarter of the socket's receive
// buffer, so the kernel need not grow the buffer (and clamp the TCP
// window) to hold it; a buffer too small for a mark worth raising gets
// none.
func TestLowWaterMarkFitsTheReceiveBuffer(t *testing.T) {
	rcvbuf := func(c *net.TCPConn) int {
		n, err := syscall.GetsockoptInt(socketFD(t, c), syscall.SOL_SOCKET, syscall.SO_RCVBUF)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	for _, size := range []int{0, 64 << 10, 16 << 10, 4 << 10} {
		a, _ := tcpPair(t)
		if size > 0 {
			if err := a.SetReadBuffer(size); err != nil {
				t.Fatal(err)
			}
		}
		buf := rcvbuf(a)
		set, mark := lowWaterFor(a)
		want := min(pauseLowWater, buf/4)
		if want < minPauseLowWater {
			if set != nil {
				t.Errorf("receive buffer %d: a mark of %d raised, want none", buf, mark)
			}
			continue
		}
		if set == nil || mark != want {
			t.Fatalf("receive buffer %d: mark %d (setter %v), want %d", buf, mark, set != nil, want)
		}
		if err := set(mark); err != nil {
			t.Fatal(err)
		}
		if after := rcvbuf(a); after != buf {
			t.Errorf("receive buffer %d became %d with the mark at %d", buf, after, mark)
		}
		if err := set(1); err != nil {
			t.Fatal(err)
		}
	}
}
