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
	ok := etcddriver.New(noServer{})
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

// badCases: bad configuration, empty or missing fields, bad numbers.
func badCases(ok *etcddriver.Backend) []badCase {
	ctx := context.Background()
	l := backend.Lease{Key: "k", Owner: "o", Token: 5, TTL: time.Second}
	return append([]badCase{
		{"nil client", etcddriver.ErrInvalid, func() error {
			_, err := etcddriver.New(nil).Acquire(ctx, attempt("k", "o"))
			return err
		}},
		{"typed nil client", etcddriver.ErrInvalid, func() error {
			_, err := etcddriver.New((*clientv3.Client)(nil)).Acquire(ctx, attempt("k", "o"))
			return err
		}},
		{"negative base", etcddriver.ErrInvalid, func() error {
			_, err := etcddriver.New(noServer{}, etcddriver.WithTokenBase(-1)).Acquire(ctx, attempt("k", "o"))
			return err
		}},
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
		{"list limit", etcddriver.ErrInvalid, func() error { _, err := ok.List(ctx, backend.ListRequest{Prefix: "p/"}); return err }},
		{"list cursor", backend.ErrBadCursor, func() error {
			_, err := ok.List(ctx, backend.ListRequest{Prefix: "p/", Cursor: "q/x", Count: 10})
			return err
		}},
		{"force negative token", etcddriver.ErrInvalid, func() error {
			_, err := ok.ForceRelease(ctx, "k", backend.Force{Token: -1})
			return err
		}},
	}, slotCases(ok)...)
}

// slotCases: the slot claims and records of package runner.
func slotCases(ok *etcddriver.Backend) []badCase {
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

// nulCases: a NUL byte in a key (which the Locker passes on), a List
// prefix or a cursor, for every method.
func nulCases(ok *etcddriver.Backend) []badCase {
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
		{"list NUL in prefix", etcddriver.ErrInvalid, func() error {
			_, err := ok.List(ctx, backend.ListRequest{Prefix: "p\x00", Count: 10})
			return err
		}},
		{"list NUL in cursor", backend.ErrBadCursor, func() error {
			_, err := ok.List(ctx, backend.ListRequest{Prefix: "p/", Cursor: "p/\x00audit", Count: 10})
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
// send nothing.
func TestBadInputThroughLocker(t *testing.T) {
	for name, b := range map[string]*etcddriver.Backend{"nil client": etcddriver.New(nil), "NUL in key": etcddriver.New(noServer{})} {
		t.Run(name, func(t *testing.T) {
			l := mutex.NewWithBackend(b)
			defer func() { assert.NoError(t, l.Close()) }()
			err := testutil.Safely(t, time.Second, func() error {
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
}
