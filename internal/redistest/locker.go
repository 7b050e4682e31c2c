package redistest

import (
	"fmt"
	"io"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/redfence/redfence/mutex"
	"github.com/redfence/redfence/mutex/backend"
	"github.com/redfence/redfence/redis/redisdriver"
	"github.com/redfence/redfence/redis/redlockdriver"
)

// Locker returns a Locker over one Redis deployment (redisdriver on c),
// closed when the test ends. opts are mutex.Option and redisdriver.Option
// values, in any order; anything else, or a construction error, fails the
// test.
func Locker(t testing.TB, c redis.UniversalClient, opts ...any) *mutex.Locker {
	t.Helper()
	l, err := NewLocker(c, opts...)
	if err != nil {
		t.Fatalf("redistest.Locker: %v", err)
	}
	t.Cleanup(func() { _ = l.Close() })
	return l
}

// NewLocker is Locker for tests of bad input: the construction's error is
// returned, and the caller closes the Locker.
func NewLocker(c redis.UniversalClient, opts ...any) (*mutex.Locker, error) {
	return over("redistest.NewLocker", opts, func(do ...redisdriver.Option) (*redisdriver.Driver, error) {
		return redisdriver.New(c, do...)
	})
}

// Redlock returns a Locker over Redlock's masters (redlockdriver on
// clients), closed when the test ends; opts as NewRedlock's.
func Redlock(t testing.TB, clients []redis.UniversalClient, opts ...any) *mutex.Locker {
	t.Helper()
	l, err := NewRedlock(clients, opts...)
	if err != nil {
		t.Fatalf("redistest.Redlock: %v", err)
	}
	t.Cleanup(func() { _ = l.Close() })
	return l
}

// NewRedlock builds a Redlock Locker: opts are mutex.Option and
// redlockdriver.Option values, in any order. The caller closes it.
func NewRedlock(clients []redis.UniversalClient, opts ...any) (*mutex.Locker, error) {
	return over("redistest.NewRedlock", opts, func(do ...redlockdriver.Option) (*redlockdriver.Driver, error) {
		return redlockdriver.New(clients, do...)
	})
}

// over sorts opts into the Locker's and the driver's, builds the driver
// with its own, and a Locker over it that owns it.
func over[O any, D interface {
	backend.Backend
	io.Closer
}](who string, opts []any, newDriver func(...O) (D, error)) (*mutex.Locker, error) {
	var lo []mutex.Option
	var do []O
	for _, o := range opts {
		switch o := o.(type) {
		case mutex.Option:
			lo = append(lo, o)
		case O:
			do = append(do, o)
		default:
			return nil, fmt.Errorf("%s: option %T is neither a mutex nor a driver option", who, o)
		}
	}
	d, err := newDriver(do...)
	if err != nil {
		return nil, err
	}
	l, err := mutex.New(d, lo...)
	if err != nil {
		_ = d.Close()
		return nil, err
	}
	return l, nil
}
