// Package netdelay forwards TCP connections on 127.0.0.1 to a target
// address with a fixed one-way latency in each direction, so that a
// benchmark can put a relay it does not run in process (a strfry) far
// away.
package netdelay

import (
	"errors"
	"net"
	"sync"
	"time"
)

// chunkSize is the most bytes read at once; inFlight is the most chunks
// on their way in one direction (their bytes are the link's buffer: a
// full one stops reading, and TCP's flow control does the rest).
const (
	chunkSize = 32 << 10
	inFlight  = 1024
)

// Proxy accepts connections on a loopback port and forwards each to the
// target, every byte arriving Delay after it was read, in each direction:
// a round trip through it takes 2×Delay more than without it.
type Proxy struct {
	ln     net.Listener
	target string
	delay  time.Duration

	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	closed bool
	wg     sync.WaitGroup
}

// Start listens on a free port of 127.0.0.1 and forwards to target (a
// host:port) with one-way latency delay.
func Start(target string, delay time.Duration) (*Proxy, error) {
	if delay < 0 {
		return nil, errors.New("netdelay: negative delay")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{ln: ln, target: target, delay: delay, conns: map[net.Conn]struct{}{}}
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

// Addr is the proxy's host:port.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Close stops accepting, cuts every forwarded connection and waits for
// their goroutines.
func (p *Proxy) Close() error {
	p.mu.Lock()
	p.closed = true
	for c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	err := p.ln.Close()
	p.wg.Wait()
	return err
}

// track registers c to be closed by Close; false when the proxy is
// closed already.
func (p *Proxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *Proxy) untrack(c net.Conn) {
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		client, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			p.serve(client)
		}()
	}
}

// serve forwards one connection until both directions end.
func (p *Proxy) serve(client net.Conn) {
	server, err := net.Dial("tcp", p.target)
	if err != nil {
		client.Close()
		return
	}
	if !p.track(client) || !p.track(server) {
		client.Close()
		server.Close()
		return
	}
	defer func() {
		client.Close()
		server.Close()
		p.untrack(client)
		p.untrack(server)
	}()
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); p.pipe(server, client) }()
	go func() { defer wg.Done(); p.pipe(client, server) }()
	wg.Wait()
}

type chunk struct {
	data []byte
	due  time.Time
}

// pipe copies src to dst, each chunk written p.delay after it was read,
// in order; at src's end it closes dst's write side (or dst, when that
// is not a TCP connection).
func (p *Proxy) pipe(dst, src net.Conn) {
	ch := make(chan chunk, inFlight)
	go func() {
		defer close(ch)
		buf := make([]byte, chunkSize)
		for {
			n, err := src.Read(buf)
			if n > 0 {
				ch <- chunk{data: append([]byte(nil), buf[:n]...), due: time.Now().Add(p.delay)}
			}
			if err != nil {
				return
			}
		}
	}()
	for c := range ch {
		if d := time.Until(c.due); d > 0 {
			time.Sleep(d)
		}
		if _, err := dst.Write(c.data); err != nil {
			src.Close() // the reader ends; drain what it queued
			for range ch {
			}
			return
		}
	}
	if tc, ok := dst.(*net.TCPConn); ok {
		tc.CloseWrite()
	} else {
		dst.Close()
	}
}
