package bench

import (
	"context"
	"errors"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
	"go.uber.org/zap"
	"google.golang.org/grpc"

	etcddriver "github.com/redfence/redfence/etcddriver"
	"github.com/redfence/redfence/internal/etcdtest"
	"github.com/redfence/redfence/mutex"
	"github.com/redfence/redfence/mutex/backend"
)

// rtt counts the requests sent through the clients it is dialled into: each
// unary call (Txn, Range, DeleteRange, LeaseGrant, LeaseRevoke,
// LeaseTimeToLive...) and each message sent on a stream (a watch created or
// cancelled, a lease keep-alive). It sits inside clientv3's retrying
// interceptor, so a retried call counts each time it is sent.
type rtt struct{ n atomic.Int64 }

func (c *rtt) unary(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoke grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	c.n.Add(1)
	return invoke(ctx, method, req, reply, cc, opts...)
}

func (c *rtt) stream(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, open grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	s, err := open(ctx, desc, cc, method, opts...)
	if err != nil {
		return nil, err
	}
	return &countedStream{ClientStream: s, c: c}, nil
}

type countedStream struct {
	grpc.ClientStream
	c *rtt
}

func (s *countedStream) SendMsg(m any) error {
	s.c.n.Add(1)
	return s.ClientStream.SendMsg(m)
}

// client is a client of srv whose requests c counts, closed at b's
// clean-up.
func client(b *testing.B, srv *etcdtest.Cluster, c *rtt) *clientv3.Client {
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   srv.Endpoints(),
		DialTimeout: 5 * time.Second,
		Logger:      zap.NewNop(),
		DialOptions: []grpc.DialOption{
			grpc.WithChainUnaryInterceptor(c.unary),
			grpc.WithChainStreamInterceptor(c.stream),
		},
	})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = cli.Close() })
	return cli
}

// A subject is one lock implementation: lock blocks until it holds key (or
// fails); the func it returns releases. rtt counts its client's requests.
type subject struct {
	name string
	rtt  *rtt
	lock func(ctx context.Context, key string) (unlock func() error, err error)
}

// redfenceSubject is a Locker over the etcd driver, on a client of its own.
func redfenceSubject(b *testing.B, cli *clientv3.Client, c *rtt) subject {
	be, err := etcddriver.New(cli, etcddriver.WithPrefix("rf/"))
	if err != nil {
		b.Fatal(err)
	}
	l, err := mutex.New(be)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = l.Close() }) // and be's: the Locker owns it
	return subject{name: "redfence", rtt: c, lock: func(ctx context.Context, key string) (func() error, error) {
		lk, err := l.Lock(ctx, key)
		if err != nil {
			return nil, err
		}
		return func() error { return lk.Release(ctx) }, nil
	}}
}

// driverSubject is the etcd driver called as the Locker calls it, without a
// Locker: what etcd and the driver cost alone.
func driverSubject(b *testing.B, cli *clientv3.Client, c *rtt) subject {
	be, err := etcddriver.New(cli, etcddriver.WithPrefix("dr/"))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = be.Close() })
	const ttl = 10 * time.Second // the Locker's default
	var n atomic.Int64
	return subject{name: "driver", rtt: c, lock: func(ctx context.Context, key string) (func() error, error) {
		owner := "driver-" + strconv.FormatInt(n.Add(1), 10) + "-0123456789abcdef0123456789abcdef" // as long as a Locker's
		g, err := be.Acquire(ctx, backend.Attempt{Key: key, Owner: owner, TTL: ttl})
		if err != nil {
			return nil, err
		}
		if g.Status != backend.Acquired {
			return nil, errHeld
		}
		return func() error {
			_, err := be.Release(ctx, backend.Lease{Key: key, Owner: owner, Token: g.Token, TTL: ttl, Handle: g.Handle})
			return err
		}, nil
	}}
}

// session is a concurrency.Session (its lease kept alive by the client,
// default TTL), closed at b's clean-up.
func session(b *testing.B, cli *clientv3.Client) *concurrency.Session {
	s, err := concurrency.NewSession(cli)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = s.Close() })
	return s
}

// mutexSubject is etcd's concurrency.Mutex on one long-lived session: a
// NewMutex per cycle, as a program that locks many keys would. One session's
// Mutexes share their keys (prefix/lease), so goroutines that contend need
// a session each.
func mutexSubject(s *concurrency.Session, c *rtt) subject {
	return subject{name: "mutex", rtt: c, lock: func(ctx context.Context, key string) (func() error, error) {
		m := concurrency.NewMutex(s, "cm/"+key)
		if err := m.Lock(ctx); err != nil {
			return nil, err
		}
		return func() error { return m.Unlock(ctx) }, nil
	}}
}

var errHeld = errors.New("bench: an uncontended key was held")

// floorSubject is the least an etcd lock can send: a put-if-absent
// transaction with a session's lease, then a delete.
func floorSubject(s *concurrency.Session, c *rtt) subject {
	cli := s.Client()
	return subject{name: "floor", rtt: c, lock: func(ctx context.Context, key string) (func() error, error) {
		k := "fl/" + key
		r, err := cli.Txn(ctx).
			If(clientv3.Compare(clientv3.CreateRevision(k), "=", 0)).
			Then(clientv3.OpPut(k, "", clientv3.WithLease(s.Lease()))).
			Commit()
		if err != nil {
			return nil, err
		}
		if !r.Succeeded {
			return nil, errHeld
		}
		return func() error { _, err := cli.Delete(ctx, k); return err }, nil
	}}
}
