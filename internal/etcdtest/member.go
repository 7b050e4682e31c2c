package etcdtest

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"sync"
	"testing"
	"time"

	"go.etcd.io/etcd/client/pkg/v3/types"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
)

// Raft timing of every member: a heartbeat of 50 ms and an election after
// 500 ms, ten times etcd's defaults' speed, so that a killed leader is
// replaced in about a second and the shortest lease is 1 s (etcd's minimum
// is 1.5 elections, rounded up to whole seconds) instead of 2.
const (
	tickMs     = 50
	electionMs = 500
)

// Member is one member of a Cluster. Clients and the other members reach it
// through gates of its own (Endpoint for clients), which Kill closes first,
// so that every connection to it breaks at once, as in a crash.
type Member struct {
	Name     string
	dir      string
	own      url.URL // the member's client listener, behind gate
	ownPeer  url.URL // its raft listener, behind peerGate
	gate     *gate
	peerGate *gate
	// initial is the cluster the member was started in, "name=peer,...".
	initial string

	mu sync.Mutex
	e  *embed.Etcd // nil while killed
}

func newMember(name, dir string) (*Member, error) {
	own, ownPeer := freeURL(), freeURL()
	if own == nil || ownPeer == nil {
		return nil, errors.New("etcdtest: no free loopback port")
	}
	g, err := newGate(own.Host)
	if err != nil {
		return nil, err
	}
	pg, err := newGate(ownPeer.Host)
	if err != nil {
		g.close()
		return nil, err
	}
	return &Member{Name: name, dir: dir, own: *own, ownPeer: *ownPeer, gate: g, peerGate: pg}, nil
}

// peer is the URL the other members reach m at.
func (m *Member) peer() url.URL { return url.URL{Scheme: "http", Host: m.peerGate.addr} }

// Endpoint is the member's client URL, http://127.0.0.1:port, the same
// across restarts.
func (m *Member) Endpoint() string { return "http://" + m.gate.addr }

// Client returns a client of this member alone, closed at t's clean-up.
func (m *Member) Client(t testing.TB) *clientv3.Client {
	t.Helper()
	return client(t, m.Endpoint())
}

// start runs the member's etcd on its data directory: a member of a new
// cluster (initial) when fresh, the member it was when restarted.
func (m *Member) start(initial string, fresh bool) error {
	m.initial = initial
	cfg := embed.NewConfig()
	cfg.Name, cfg.Dir = m.Name, m.dir
	gate, _ := url.Parse(m.Endpoint())
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{m.own}, []url.URL{*gate}
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{m.ownPeer}, []url.URL{m.peer()}
	cfg.InitialCluster = initial
	cfg.ClusterState = embed.ClusterStateFlagExisting
	if fresh {
		cfg.ClusterState = embed.ClusterStateFlagNew
	}
	cfg.TickMs, cfg.ElectionMs = tickMs, electionMs
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.NewNop())
	cfg.UnsafeNoFsync = true // a test's data outlives nothing
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return fmt.Errorf("etcdtest: start %s: %w", m.Name, err)
	}
	m.mu.Lock()
	m.e = e
	m.mu.Unlock()
	return nil
}

// ready waits until the member serves clients (it joined the cluster).
func (m *Member) ready(deadline time.Time) error {
	e := m.etcd()
	if e == nil {
		return fmt.Errorf("etcdtest: %s is not running", m.Name)
	}
	t := time.NewTimer(time.Until(deadline))
	defer t.Stop()
	select {
	case <-e.Server.ReadyNotify():
		return nil
	case err := <-e.Err():
		return fmt.Errorf("etcdtest: %s: %w", m.Name, err)
	case <-t.C:
		return fmt.Errorf("etcdtest: %s not ready within %v", m.Name, readyWithin)
	}
}

func (m *Member) etcd() *embed.Etcd {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.e
}

// Running says whether the member runs (it was not killed, or was restarted).
func (m *Member) Running() bool { return m.etcd() != nil }

// id is the member's raft id; 0 when not running.
func (m *Member) id() types.ID {
	if e := m.etcd(); e != nil {
		return e.Server.MemberID()
	}
	return 0
}

// Kill stops the member as a crash would: every connection to it (its
// clients', its peers') reset and new ones too (the gates go down),
// raft stopped without handing leadership on, then the member closed, which
// frees its ports and data directory for Restart. It returns once the
// member's goroutines ended; killing a killed member does nothing.
//
// The gates also keep Close quick and clean: it would wait up to a second
// for its peers' connections to go idle, and leave behind the ones that did
// not (their server side waits out etcd's 5 s read timeout).
func (m *Member) Kill() {
	m.mu.Lock()
	e := m.e
	m.e = nil
	m.mu.Unlock()
	m.gate.down()
	m.peerGate.down()
	if e == nil {
		return
	}
	e.Server.HardStop()
	e.Close()
}

// Pause stops the member as SIGSTOP stops a process, which a member
// embedded in the test's process cannot be: its gates hold their bytes (its
// clients' connections and its peers' connections to it accept and read but
// forward nothing), and its raft transport drops what it would send and
// what arrives on the streams it opened (etcd's test hook
// EtcdServer.PauseSending). Unlike a stopped process its timers still run: a
// paused leader steps down once it hears no quorum (CheckQuorum), but
// nothing it does reaches anyone. Resume ends the pause, and so does Kill;
// pausing a killed member does nothing.
func (m *Member) Pause() {
	e := m.etcd()
	if e == nil {
		return
	}
	m.gate.hold(true)
	m.peerGate.hold(true)
	e.Server.PauseSending()
}

// Resume ends a pause: the member sends again and its gates forward what
// they held, then what comes.
func (m *Member) Resume() {
	if e := m.etcd(); e != nil {
		e.Server.ResumeSending()
	}
	m.peerGate.hold(false)
	m.gate.hold(false)
}

// Restart runs m, a killed member of c, again on its data directory behind
// its gates (its own listeners may move), and returns once it rejoined the
// cluster (which needs a majority running) and they agree on a leader. Its
// client URL is the one it had.
func (c *Cluster) Restart(m *Member) error {
	if m.Running() {
		return fmt.Errorf("etcdtest: %s is running", m.Name)
	}
	var err error
	for range 5 { // its own ports, free when it was killed, may be taken since
		if err = m.start(m.initial, false); err == nil {
			break
		}
		own, ownPeer := freeURL(), freeURL()
		if own == nil || ownPeer == nil {
			return errors.New("etcdtest: no free loopback port")
		}
		m.own, m.ownPeer = *own, *ownPeer
	}
	if err != nil {
		return err
	}
	m.peerGate.up(m.ownPeer.Host)
	deadline := time.Now().Add(readyWithin)
	if err := m.ready(deadline); err != nil {
		m.Kill()
		return err
	}
	m.gate.up(m.own.Host)
	_, err = c.leader(deadline)
	return err
}

// freeURL returns http://127.0.0.1:port for a port free a moment ago.
func freeURL() *url.URL {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	u, _ := url.Parse("http://" + addr)
	return u
}
