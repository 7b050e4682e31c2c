package etcdtest

import (
	"net"
	"sync"
	"time"
)

// gate is a member's client address: a loopback TCP forwarder to the
// member's own client listener that can go down (listener and every
// connection closed, so that clients see refused dials and reset streams, as
// when a process dies) and come up again on the same address, and that can
// hold its traffic (connections accepted, bytes read but not forwarded until
// it lets go, as when a process is stopped).
//
// Why not the member's own port: embed.Etcd.Close drains the gRPC server
// gracefully, waiting up to its request timeout (over 5 s) for the clients'
// open watch streams; a gate that went down first leaves it nothing to wait
// for, and its clients never get the polite GOAWAY a crash would not send.
type gate struct {
	addr   string // host:port clients dial; fixed for the gate's life
	target string // the member's client listener

	mu    sync.Mutex
	cond  *sync.Cond   // signalled when held flips or ln changes
	ln    net.Listener // nil while down
	held  bool         // hold: forward nothing
	conns map[net.Conn]struct{}
	wg    sync.WaitGroup // accept loop and forwarders
}

// newGate forwards a free loopback port to target, at once.
func newGate(target string) (*gate, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	g := &gate{addr: ln.Addr().String(), conns: map[net.Conn]struct{}{}}
	g.cond = sync.NewCond(&g.mu)
	g.open(ln, target)
	return g, nil
}

// up listens again on the gate's address and forwards to target.
func (g *gate) up(target string) error {
	ln, err := net.Listen("tcp", g.addr)
	if err != nil {
		return err
	}
	g.open(ln, target)
	return nil
}

func (g *gate) open(ln net.Listener, target string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.ln, g.target = ln, target
	g.wg.Add(1)
	go g.accept(ln)
}

// down closes the listener and every connection, ends a hold, and waits for
// the gate's goroutines. It is safe to call while down.
func (g *gate) down() {
	g.mu.Lock()
	if g.ln != nil {
		_ = g.ln.Close()
		g.ln = nil
	}
	for c := range g.conns {
		_ = c.Close()
	}
	g.held = false
	g.cond.Broadcast()
	g.mu.Unlock()
	g.wg.Wait()
}

// hold stops forwarding (on) or forwards again what it held and what comes
// (off). Connections stay open and new ones are accepted meanwhile.
func (g *gate) hold(on bool) {
	g.mu.Lock()
	g.held = on
	g.cond.Broadcast()
	g.mu.Unlock()
}

// pass waits while the gate holds and reports whether a connection that ln
// accepted may still forward: false once the gate went down since.
func (g *gate) pass(ln net.Listener) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	for g.held && g.ln == ln {
		g.cond.Wait()
	}
	return g.ln == ln
}

func (g *gate) accept(ln net.Listener) {
	defer g.wg.Done()
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		if !g.track(ln, c) {
			return
		}
		g.wg.Add(1)
		go g.serve(ln, c)
	}
}

// track keeps c for down, unless the gate went down (or up again on another
// listener) since ln accepted it.
func (g *gate) track(ln net.Listener, c net.Conn) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.ln != ln {
		_ = c.Close()
		return false
	}
	g.conns[c] = struct{}{}
	return true
}

func (g *gate) untrack(c net.Conn) {
	g.mu.Lock()
	delete(g.conns, c)
	g.mu.Unlock()
	_ = c.Close()
}

func (g *gate) serve(ln net.Listener, down net.Conn) {
	defer g.wg.Done()
	defer g.untrack(down)
	g.mu.Lock()
	target := g.target
	g.mu.Unlock()
	up, err := net.DialTimeout("tcp", target, time.Second)
	if err != nil {
		return
	}
	if !g.track(ln, up) {
		return
	}
	defer g.untrack(up)
	done := make(chan struct{}, 2)
	go func() { g.pump(ln, up, down); done <- struct{}{} }()
	go func() { g.pump(ln, down, up); done <- struct{}{} }()
	<-done
	// One direction ended: end the other.
	_ = up.Close()
	_ = down.Close()
	<-done
}

// pump copies src to dst, holding each chunk while the gate holds, until
// either side fails or the gate goes down.
func (g *gate) pump(ln net.Listener, dst, src net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if !g.pass(ln) {
				return
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
