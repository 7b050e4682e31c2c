package etcdtest

import (
	"net"
	"sync"
	"time"
)

// gate is a member's client address: a loopback TCP forwarder to the
// member's own client listener that can go down (every connection closed
// and new ones reset at once, as when a process dies) and come up again,
// and that can hold its traffic (connections accepted, bytes read but not
// forwarded until it lets go, as when a process is stopped).
//
// Why not the member's own port: embed.Etcd.Close drains the gRPC server
// gracefully, waiting up to its request timeout (over 5 s) for the clients'
// open watch streams; a gate that went down first leaves it nothing to wait
// for, and its clients never get the polite GOAWAY a crash would not send.
//
// The gate keeps its listener while down: a port closed and listened on
// again can meanwhile be taken by any socket's ephemeral port (a restart
// once failed with "address already in use"). A connection accepted while
// down is reset at once, which a client meets as it meets a refused dial.
type gate struct {
	addr string       // host:port clients dial; fixed for the gate's life
	ln   net.Listener // open until close
	acc  sync.WaitGroup

	mu     sync.Mutex
	cond   *sync.Cond // signalled when held or up changes
	target string     // the member's client listener
	period *struct{}  // this up period; nil while down
	held   bool       // hold: forward nothing
	conns  map[net.Conn]struct{}
	wg     sync.WaitGroup // forwarders
}

// newGate forwards a free loopback port to target, at once.
func newGate(target string) (*gate, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	g := &gate{addr: ln.Addr().String(), ln: ln, conns: map[net.Conn]struct{}{}}
	g.cond = sync.NewCond(&g.mu)
	g.up(target)
	g.acc.Add(1)
	go g.accept()
	return g, nil
}

// up forwards again, to target.
func (g *gate) up(target string) {
	g.mu.Lock()
	g.target, g.period = target, new(struct{})
	g.cond.Broadcast()
	g.mu.Unlock()
}

// down closes every connection, resets new ones until up, ends a hold, and
// waits for the forwarders. It is safe to call while down.
func (g *gate) down() {
	g.mu.Lock()
	g.period = nil
	for c := range g.conns {
		_ = c.Close()
	}
	g.held = false
	g.cond.Broadcast()
	g.mu.Unlock()
	g.wg.Wait()
}

// close takes the gate down and frees its address for good.
func (g *gate) close() {
	g.down()
	_ = g.ln.Close()
	g.acc.Wait()
}

// hold stops forwarding (on) or forwards again what it held and what comes
// (off). Connections stay open and new ones are accepted meanwhile.
func (g *gate) hold(on bool) {
	g.mu.Lock()
	g.held = on
	g.cond.Broadcast()
	g.mu.Unlock()
}

// pass waits while the gate holds and reports whether a connection accepted
// in the up period p may still forward: false once the gate went down since.
func (g *gate) pass(p *struct{}) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	for g.held && g.period == p {
		g.cond.Wait()
	}
	return g.period == p
}

func (g *gate) accept() {
	defer g.acc.Done()
	for {
		c, err := g.ln.Accept()
		if err != nil {
			return
		}
		g.mu.Lock()
		p := g.period
		g.mu.Unlock()
		if p == nil || !g.track(p, c) {
			reset(c)
			continue
		}
		g.wg.Add(1)
		go g.serve(p, c)
	}
}

// reset closes c with a RST instead of a FIN, as a dead process's port does.
func reset(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	_ = c.Close()
}

// track keeps c for down, unless the gate went down (or up again) since the
// up period p in which c was accepted or dialled.
func (g *gate) track(p *struct{}, c net.Conn) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.period != p {
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

func (g *gate) serve(p *struct{}, down net.Conn) {
	defer g.wg.Done()
	defer g.untrack(down)
	g.mu.Lock()
	target := g.target
	g.mu.Unlock()
	up, err := net.DialTimeout("tcp", target, time.Second)
	if err != nil {
		return
	}
	if !g.track(p, up) {
		_ = up.Close()
		return
	}
	defer g.untrack(up)
	done := make(chan struct{}, 2)
	go func() { g.pump(p, up, down); done <- struct{}{} }()
	go func() { g.pump(p, down, up); done <- struct{}{} }()
	<-done
	// One direction ended: end the other.
	_ = up.Close()
	_ = down.Close()
	<-done
}

// pump copies src to dst, holding each chunk while the gate holds, until
// either side fails or the gate goes down.
func (g *gate) pump(p *struct{}, dst, src net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if !g.pass(p) {
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
