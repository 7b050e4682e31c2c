// Package etcdtest starts embedded etcd members (go.etcd.io/etcd/server/v3/embed)
// on free loopback ports in a test's temporary directory, for the tests and
// examples of package etcdlock. Nothing has to be installed.
package etcdtest

import (
	"fmt"
	"net"
	"net/url"
	"os"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
)

// readyWithin bounds a member's start; a loaded 2-vCPU machine starts one
// in well under a second.
const readyWithin = 30 * time.Second

// Server is one running etcd member.
type Server struct {
	e        *embed.Etcd
	Endpoint string // the client URL, http://127.0.0.1:port
}

// Start runs a single-member cluster in t's temporary directory and stops it
// at t's clean-up.
func Start(t testing.TB) *Server {
	t.Helper()
	s, err := StartIn(t.TempDir())
	if err != nil {
		t.Fatalf("etcdtest: %v", err)
	}
	t.Cleanup(s.Stop)
	return s
}

// StartIn runs a single-member cluster with its data in dir; the caller stops
// it (Stop). Examples use it: they have no testing.TB.
func StartIn(dir string) (*Server, error) {
	var last error
	for range 5 { // a free port can be taken between the probe and the listen
		s, err := start(dir)
		if err == nil {
			return s, nil
		}
		last = err
		_ = os.RemoveAll(dir + "/member")
	}
	return nil, last
}

func start(dir string) (*Server, error) {
	client, peer := freeURL(), freeURL()
	if client == nil || peer == nil {
		return nil, fmt.Errorf("no free loopback port")
	}
	cfg := embed.NewConfig()
	cfg.Name = "m0"
	cfg.Dir = dir
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{*client}, []url.URL{*client}
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{*peer}, []url.URL{*peer}
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.NewNop())
	cfg.UnsafeNoFsync = true // a test's data outlives nothing
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return nil, err
	}
	select {
	case <-e.Server.ReadyNotify():
	case err := <-e.Err():
		e.Close()
		return nil, err
	case <-time.After(readyWithin):
		e.Close()
		return nil, fmt.Errorf("member not ready within %v", readyWithin)
	}
	return &Server{e: e, Endpoint: client.String()}, nil
}

// Stop stops the member and waits for its goroutines.
func (s *Server) Stop() { s.e.Close() }

// Client returns a client of s, closed at t's clean-up.
func (s *Server) Client(t testing.TB) *clientv3.Client {
	t.Helper()
	c, err := s.NewClient()
	if err != nil {
		t.Fatalf("etcdtest: %v", err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// NewClient returns a client of s; the caller closes it.
func (s *Server) NewClient() (*clientv3.Client, error) {
	return NewClient(s.Endpoint)
}

// NewClient returns a client of the given endpoints, quiet (no logger).
func NewClient(endpoints ...string) (*clientv3.Client, error) {
	return clientv3.New(clientv3.Config{
		Endpoints:   endpoints,
		DialTimeout: 5 * time.Second,
		Logger:      zap.NewNop(),
	})
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
