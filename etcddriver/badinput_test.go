package etcddriver_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	clientv3 "go.etcd.io/etcd/client/v3"

	etcddriver "github.com/redfence/redfence/etcddriver"
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

// badCase is a call with bad input and the sentinel its error must match.
type badCase struct {
	name string
	want error
	call func() error
}

// Bad input gets an error matching the documented sentinel at once, and no
// request.
func TestBadInput(t *testing.T) {
	ok, err := etcddriver.New(noServer{})
	if !assert.NoError(t, err) {
		return
	}
	t.Cleanup(func() { assert.NoError(t, ok.Close()) })
	for _, c := range append(badCases(ok), nulCases(ok)...) {
		t.Run(c.name, func(t *testing.T) {
			err := testutil.Safely(t, time.Second, c.call)
			assert.ErrorIs(t, err, c.want)
			if c.want == etcddriver.ErrInvalid {
				assert.ErrorIs(t, err, mutex.ErrInvalid, "the contract's sentinel")
			}
		})
	}
	// A watch of a bad key is none; its stop is safe.
	testutil.Safely(t, time.Second, func() error { _, stop := ok.Watch("", func() {}); stop(); return nil })
}

// newDriver is New's error, the Driver built closed: a bad configuration
// is refused by New.
func newDriver(c etcddriver.Client, opts ...etcddriver.Option) error {
	d, err := etcddriver.New(c, opts...)
	if d != nil {
		_ = d.Close()
	}
	return err
}

// badCases: bad configuration, empty or missing fields, bad numbers.
func badCases(ok *etcddriver.Driver) []badCase {
	ctx := context.Background()
	l := backend.Lease{Key: "k", Owner: "o", Token: 5, TTL: time.Second}
	return append([]badCase{
		{"nil client", etcddriver.ErrInvalid, func() error { return newDriver(nil) }},
		{"typed nil client", etcddriver.ErrInvalid, func() error { return newDriver((*clientv3.Client)(nil)) }},
		{"negative base", etcddriver.ErrInvalid, func() error { return newDriver(noServer{}, etcddriver.WithTokenBase(-1)) }},
		{"empty key", etcddriver.ErrInvalid, func() error { _, err := ok.Acquire(ctx, attempt("", "o")); return err }},
		{"NUL in key", etcddriver.ErrInvalid, func() error { _, err := ok.Acquire(ctx, attempt("a\x00b", "o")); return err }},
		{"empty owner", etcddriver.ErrInvalid, func() error { _, err := ok.Acquire(ctx, attempt("k", "")); return err }},
		{"NUL in owner", etcddriver.ErrInvalid, func() error { _, err := ok.Acquire(ctx, attempt("k", "o\x00")); return err }},
		{"zero TTL", etcddriver.ErrInvalid, func() error {
			_, err := ok.Acquire(ctx, backend.Attempt{Key: "k", Owner: "o"})
			return err
		}},
		{"zero token", etcddriver.ErrInvalid, func() error {
			_, err := ok.Release(ctx, backend.Lease{Key: "k", Owner: "o"})
			return err
		}},
		{"extend TTL", etcddriver.ErrInvalid, func() error {
			_, err := ok.Extend(ctx, []backend.Lease{l, {Key: "k", Owner: "o", Token: 5}})
			return err
		}},
		{"ttl empty owner", etcddriver.ErrInvalid, func() error {
			_, err := ok.TTL(ctx, backend.Lease{Key: "k", Token: 5})
			return err
		}},
		{"abandon empty key", etcddriver.ErrInvalid, func() error { return ok.Abandon(ctx, "", "o") }},
		{"inspect empty key", etcddriver.ErrInvalid, func() error { _, err := ok.Inspect(ctx, ""); return err }},
		{"list limit", etcddriver.ErrInvalid, func() error { _, err := ok.List(ctx, backend.ListRequest{}); return err }},
		{"list cursor", backend.ErrBadCursor, func() error {
			_, err := ok.List(ctx, backend.ListRequest{Cursor: "q/x", Count: 10}) // not under "redfence:"
			return err
		}},
		{"force negative token", etcddriver.ErrInvalid, func() error {
			_, err := ok.ForceRelease(ctx, "k", backend.Force{Token: -1})
			return err
		}},
	}, slotCases(ok)...)
}

// slotCases: the slot claims and records of package runner.
func slotCases(ok *etcddriver.Driver) []badCase {
	ctx := context.Background()
	sc := backend.SlotClaim{Key: "k", Slot: 1, Claimer: "c", TTL: time.Minute}
	claim := func(edit func(c *backend.SlotClaim)) func() error {
		c := sc
		edit(&c)
		return func() error { _, err := ok.ClaimSlot(ctx, c); return err }
	}
	return []badCase{
		{"claim empty key", etcddriver.ErrInvalid, claim(func(c *backend.SlotClaim) { c.Key = "" })},
		{"claim NUL in key", etcddriver.ErrInvalid, claim(func(c *backend.SlotClaim) { c.Key = "a\x00b" })},
		{"claim empty claimer", etcddriver.ErrInvalid, claim(func(c *backend.SlotClaim) { c.Claimer = "" })},
		{"claim NUL in claimer", etcddriver.ErrInvalid, claim(func(c *backend.SlotClaim) { c.Claimer = "c\x00" })},
		{"claim zero TTL", etcddriver.ErrInvalid, claim(func(c *backend.SlotClaim) { c.TTL = 0 })},
		{"claim negative gap", etcddriver.ErrInvalid, claim(func(c *backend.SlotClaim) { c.Gap = -time.Second })},
		{"put record empty key", etcddriver.ErrInvalid, func() error { return ok.PutRecord(ctx, "", nil, time.Minute) }},
		{"put record NUL in key", etcddriver.ErrInvalid, func() error { return ok.PutRecord(ctx, "a\x00b", nil, time.Minute) }},
		{"put record zero TTL", etcddriver.ErrInvalid, func() error { return ok.PutRecord(ctx, "k", nil, 0) }},
		{"get record empty key", etcddriver.ErrInvalid, func() error { _, _, err := ok.GetRecord(ctx, ""); return err }},
		{"get record NUL in key", etcddriver.ErrInvalid, func() error { _, _, err := ok.GetRecord(ctx, "a\x00b"); return err }},
	}
}

// nulCases: a NUL byte in a key (which the Locker passes on), the prefix
// or a List cursor, for every method.
func nulCases(ok *etcddriver.Driver) []badCase {
	ctx := context.Background()
	l := backend.Lease{Key: "k", Owner: "o", Token: 5, TTL: time.Second}
	return []badCase{
		{"release NUL in key", etcddriver.ErrInvalid, func() error { _, err := ok.Release(ctx, nul(l)); return err }},
		{"extend NUL in key", etcddriver.ErrInvalid, func() error {
			_, err := ok.Extend(ctx, []backend.Lease{l, nul(l)})
			return err
		}},
		{"ttl NUL in key", etcddriver.ErrInvalid, func() error { _, err := ok.TTL(ctx, nul(l)); return err }},
		{"abandon NUL in key", etcddriver.ErrInvalid, func() error { return ok.Abandon(ctx, "a\x00b", "o") }},
		{"inspect NUL in key", etcddriver.ErrInvalid, func() error { _, err := ok.Inspect(ctx, "a\x00b"); return err }},
		{"force NUL in key", etcddriver.ErrInvalid, func() error {
			_, err := ok.ForceRelease(ctx, "a\x00b", backend.Force{})
			return err
		}},
		{"NUL in prefix", etcddriver.ErrInvalid, func() error { return newDriver(noServer{}, etcddriver.WithPrefix("p\x00")) }},
		{"list NUL in cursor", backend.ErrBadCursor, func() error {
			_, err := ok.List(ctx, backend.ListRequest{Cursor: "redfence:k\x00audit", Count: 10})
			return err
		}},
	}
}

// nul is l with a NUL byte in its key.
func nul(l backend.Lease) backend.Lease {
	l.Key = "a\x00b"
	return l
}

// The driver's bad input is the contract's: one sentinel for the driver,
// the backend package and the Locker.
func TestErrInvalidIsTheContracts(t *testing.T) {
	assert.Same(t, backend.ErrInvalid, etcddriver.ErrInvalid)
	assert.Same(t, mutex.ErrInvalid, etcddriver.ErrInvalid)
}

// Through a Locker, a nil client and a key with a NUL byte (which the
// Locker passes on) reach the caller as mutex.ErrInvalid, not a panic, and
// send nothing: the nil client from the driver's New, the key from every
// call.
func TestBadInputThroughLocker(t *testing.T) {
	t.Run("nil client", func(t *testing.T) {
		err := testutil.Safely(t, time.Second, func() error {
			d, err := etcddriver.New(nil)
			assert.Nil(t, d)
			return err
		})
		assert.ErrorIs(t, err, mutex.ErrInvalid)
		_, err = mutex.New((*etcddriver.Driver)(nil))
		assert.ErrorIs(t, err, mutex.ErrInvalid, "nor a Locker over no Driver")
	})
	t.Run("NUL in key", func(t *testing.T) {
		b, err := etcddriver.New(noServer{})
		if !assert.NoError(t, err) {
			return
		}
		l := testutil.WithBackend(t, b)
		err = testutil.Safely(t, time.Second, func() error {
			_, err := l.TryLock(context.Background(), "k\x00")
			return err
		})
		assert.ErrorIs(t, err, mutex.ErrInvalid)
		// A waiting Lock stops at the backend's refusal too: no ctx
		// deadline would end its retries.
		err = testutil.Safely(t, time.Second, func() error {
			_, err := l.Lock(context.Background(), "k\x00")
			return err
		})
		assert.ErrorIs(t, err, mutex.ErrInvalid)
		assert.NotErrorIs(t, err, mutex.ErrUnavailable, "bad input is no outage")
	})
}
