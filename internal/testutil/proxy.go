package testutil

import (
	"net"
	"sync"
	"sync/atomic"
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
	gen     int     // incremented by Cut, so pumps held in a black hole end too
	lag     wakeLag // the delay timers' wake-up lag, which they aim early by
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

// SetLatency delays every chunk forwarded in either direction by d, the
// one-way delay of a link: a request and its reply take 2d more. A chunk is
// due d after it arrived, not after the chunk before it was delivered, so
// back-to-back chunks of one connection (pipelined commands) are not delayed
// more than a link would delay them, and connections are delayed
// independently. The delay is a kernel timer's, precise to tens of
// microseconds, where a Go timer rounds a sub-millisecond wait up to a
// millisecond or more (see delayTimer). A new d applies to chunks that
// arrive after the call; order is kept.
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

// chunk is bytes read from one side, to be written to the other at due.
type chunk struct {
	b   []byte
	due time.Time
}

// pump copies src to dst, delaying each chunk by the latency set when it
// arrived and holding chunks while the proxy is a black hole. A reader (this
// goroutine) stamps the chunks and a writer delivers them in order, so that
// the delays of back-to-back chunks overlap as on a link; the queue between
// them is bounded, so a held writer stops the reader too. Without latency,
// and with nothing queued, the reader writes a chunk itself. It returns when
// either side fails, after the writer has ended.
func (p *TCPProxy) pump(dst, src net.Conn) {
	p.mu.Lock()
	gen := p.gen
	p.mu.Unlock()
	queue := make(chan chunk, 64)
	var queued atomic.Int32        // chunks sent to the writer and not yet written
	stopped := make(chan struct{}) // closed when the writer returns
	go func() {
		defer close(stopped)
		defer src.Close() // a writer that gave up ends the reader's Read
		p.deliver(dst, queue, &queued, gen)
	}()
	defer func() { <-stopped }()
	defer close(queue)
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			p.mu.Lock()
			lat := p.latency
			p.mu.Unlock()
			if lat == 0 && queued.Load() == 0 {
				// Nothing for the writer to deliver first: as fast as a
				// direct connection, and in order.
				if !p.pass(gen) {
					return
				}
				if _, werr := dst.Write(buf[:n]); werr != nil {
					return
				}
			} else {
				queued.Add(1)
				select {
				case queue <- chunk{b: append([]byte(nil), buf[:n]...), due: time.Now().Add(lat)}:
				case <-stopped:
					return
				}
			}
		}
		if err != nil {
			return // the writer delivers what is queued, then returns
		}
	}
}

// deliver writes the queued chunks to dst, each at its due time, until the
// queue closes, a write fails, or a Cut or Close ends the connection.
func (p *TCPProxy) deliver(dst net.Conn, queue <-chan chunk, queued *atomic.Int32, gen int) {
	var timer *delayTimer // made on the first delayed chunk
	defer func() {
		if timer != nil {
			timer.Close()
		}
	}()
	for c := range queue {
		if time.Now().Before(c.due) {
			if timer == nil {
				timer = newDelayTimer(&p.lag)
			}
			timer.sleepUntil(c.due) // the injected latency, not synchronisation
		}
		if !p.pass(gen) {
			return
		}
		if _, err := dst.Write(c.b); err != nil {
			return
		}
		queued.Add(-1)
	}
}

// pass waits while the proxy is a black hole and reports whether a chunk of
// a connection opened in generation gen may still be forwarded: false once
// the proxy closed or Cut ended the connection.
func (p *TCPProxy) pass(gen int) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	for p.blocked && !p.closed && p.gen == gen {
		p.cond.Wait()
	}
	return !p.closed && p.gen == gen
}
