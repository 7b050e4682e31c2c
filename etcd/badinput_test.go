package etcdlock_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	clientv3 "go.etcd.io/etcd/client/v3"

	etcdlock "github.com/redfence/redfence/etcd"
	"github.com/redfence/redfence/internal/testutil"
	"github.com/redfence/redfence/mutex"
	"github.com/redfence/redfence/mutex/backend"
)

// noServer is a Client whose every method panics (nil interfaces): a bad
// input that reached etcd would fail the test through testutil.Safely.
type noServer struct {
	clientv3.KV
	clientv3.Lease
	clientv3.Watcher
}

func (noServer) Close() error { return nil }

// Bad input gets an error matching the documented sentinel at once, and no
// request.
func TestBadInput(t *testing.T) {
	ctx := context.Background()
	ok := etcdlock.New(noServer{})
	l := backend.Lease{Key: "k", Owner: "o", Token: 5, TTL: time.Second}
	cases := []struct {
		name string
		want error
		call func() error
	}{
		{"nil client", etcdlock.ErrInvalid, func() error {
			_, err := etcdlock.New(nil).Acquire(ctx, attempt("k", "o"))
			return err
		}},
		{"typed nil client", etcdlock.ErrInvalid, func() error {
			_, err := etcdlock.New((*clientv3.Client)(nil)).Acquire(ctx, attempt("k", "o"))
			return err
		}},
		{"negative base", etcdlock.ErrInvalid, func() error {
			_, err := etcdlock.New(noServer{}, etcdlock.WithTokenBase(-1)).Acquire(ctx, attempt("k", "o"))
			return err
		}},
		{"empty key", etcdlock.ErrInvalid, func() error { _, err := ok.Acquire(ctx, attempt("", "o")); return err }},
		{"NUL in key", etcdlock.ErrInvalid, func() error { _, err := ok.Acquire(ctx, attempt("a\x00b", "o")); return err }},
		{"empty owner", etcdlock.ErrInvalid, func() error { _, err := ok.Acquire(ctx, attempt("k", "")); return err }},
		{"NUL in owner", etcdlock.ErrInvalid, func() error { _, err := ok.Acquire(ctx, attempt("k", "o\x00")); return err }},
		{"zero TTL", etcdlock.ErrInvalid, func() error {
			_, err := ok.Acquire(ctx, backend.Attempt{Key: "k", Owner: "o"})
			return err
		}},
		{"zero token", etcdlock.ErrInvalid, func() error {
			_, err := ok.Release(ctx, backend.Lease{Key: "k", Owner: "o"})
			return err
		}},
		{"extend TTL", etcdlock.ErrInvalid, func() error {
			_, err := ok.Extend(ctx, []backend.Lease{l, {Key: "k", Owner: "o", Token: 5}})
			return err
		}},
		{"ttl empty owner", etcdlock.ErrInvalid, func() error {
			_, err := ok.TTL(ctx, backend.Lease{Key: "k", Token: 5})
			return err
		}},
		{"abandon empty key", etcdlock.ErrInvalid, func() error { return ok.Abandon(ctx, "", "o") }},
		{"inspect empty key", etcdlock.ErrInvalid, func() error { _, err := ok.Inspect(ctx, ""); return err }},
		{"list limit", etcdlock.ErrInvalid, func() error { _, err := ok.List(ctx, backend.ListRequest{Prefix: "p/"}); return err }},
		{"list cursor", backend.ErrBadCursor, func() error {
			_, err := ok.List(ctx, backend.ListRequest{Prefix: "p/", Cursor: "q/x", Count: 10})
			return err
		}},
		{"force negative token", etcdlock.ErrInvalid, func() error {
			_, err := ok.ForceRelease(ctx, "k", backend.Force{Token: -1})
			return err
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := testutil.Safely(t, time.Second, c.call)
			assert.ErrorIs(t, err, c.want)
		})
	}
	// A watch of a bad key is none; its stop is safe.
	testutil.Safely(t, time.Second, func() error { _, stop := ok.Watch("", func() {}); stop(); return nil })
}

// Through a Locker, a nil client reaches the caller as the Locker's bad
// input, not a panic.
func TestBadInputThroughLocker(t *testing.T) {
	l := mutex.NewWithBackend(etcdlock.New(nil))
	defer func() { _ = l.Close() }()
	err := testutil.Safely(t, time.Second, func() error {
		_, err := l.TryLock(context.Background(), "k")
		return err
	})
	assert.ErrorIs(t, err, etcdlock.ErrInvalid)
}
