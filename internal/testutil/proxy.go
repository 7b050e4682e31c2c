package testutil

import (
	"net"
	"sync"
	"testing"
	"time"
)

// TCPProxy sits between a client and a server on loopback and injects faults:
// added latency, a black hole (connections are accepted and bytes are read but
// nothing is forwarded until Heal, as in a partition), and cutting every
// connection. Its methods are safe for concurrent use.
type TCPProxy struct {
	target string
	ln     net.Listener

	mu      sync.Mutex
	cond    *sync.Cond // signalled when blocked flips or the proxy closes
	latency time.Duration
	blocked bool
	closed  bool
	gen     int // incremented by Cut, so pumps held in a black hole end too
	conns   map[net.Conn]struct{}
	wg      sync.WaitGroup
}

// Proxy starts a TCP proxy on a free loopback port forwarding to target. It
// is closed, and all its goroutines waited for, at Cleanup.
func Proxy(t testing.TB, target string) *TCPProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("testutil: proxy listen: %v", err)
	}
	p := &TCPProxy{target: target, ln: ln, conns: map[net.Conn]struct{}{}}
	p.cond = sync.NewCond(&p.mu)
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.Close)
	return p
}

// Addr is the address clients dial instead of the target.
func (p *TCPProxy) Addr() string { return p.ln.Addr().String() }

// SetLatency delays every chunk forwarded in either direction by d.
func (p *TCPProxy) SetLatency(d time.Duration) {
	p.mu.Lock()
	p.latency = d
	p.mu.Unlock()
}

// BlackHole stops forwarding: bytes already sent and new connections hang.
func (p *TCPProxy) BlackHole() {
	p.mu.Lock()
	p.blocked = true
	p.mu.Unlock()
}

// Cut closes every open connection, on both sides. New connections are
// accepted as before.
func (p *TCPProxy) Cut() {
	p.mu.Lock()
	for c := range p.conns {
		_ = c.Close()
	}
	p.gen++
	p.cond.Broadcast()
	p.mu.Unlock()
}

// Heal removes latency and the black hole; held bytes flow again.
func (p *TCPProxy) Heal() {
	p.mu.Lock()
	p.latency, p.blocked = 0, false
	p.cond.Broadcast()
	p.mu.Unlock()
}

// Close stops the proxy, closes all connections and waits for its goroutines.
func (p *TCPProxy) Close() {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return
	}
	p.closed = true
	_ = p.ln.Close()
	for c := range p.conns {
		_ = c.Close()
	}
	p.cond.Broadcast()
	p.mu.Unlock()
	p.wg.Wait()
}

func (p *TCPProxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		_ = c.Close()
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *TCPProxy) untrack(c net.Conn) {
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
	_ = c.Close()
}

func (p *TCPProxy) accept() {
	defer p.wg.Done()
	for {
		down, err := p.ln.Accept()
		if err != nil {
			return
		}
		if !p.track(down) {
			return
		}
		p.wg.Add(1)
		go p.serve(down)
	}
}

func (p *TCPProxy) serve(down net.Conn) {
	defer p.wg.Done()
	defer p.untrack(down)
	up, err := net.DialTimeout("tcp", p.target, time.Second)
	if err != nil {
		return
	}
	if !p.track(up) {
		return
	}
	defer p.untrack(up)
	done := make(chan struct{}, 2)
	go func() { p.pump(up, down); done <- struct{}{} }()
	go func() { p.pump(down, up); done <- struct{}{} }()
	<-done
	// One direction ended: end the other by closing both ends.
	_ = up.Close()
	_ = down.Close()
	<-done
}

// pump copies src to dst, holding chunks while the proxy is a black hole and
// delaying them by the configured latency.
func (p *TCPProxy) pump(dst, src net.Conn) {
	p.mu.Lock()
	gen := p.gen
	p.mu.Unlock()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			p.mu.Lock()
			for p.blocked && !p.closed && p.gen == gen {
				p.cond.Wait()
			}
			lat, dead := p.latency, p.closed || p.gen != gen
			p.mu.Unlock()
			if dead {
				return
			}
			if lat > 0 {
				time.Sleep(lat) // injected latency, not synchronisation
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}
