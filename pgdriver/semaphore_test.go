package pgdriver_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redfence/redfence/internal/testutil"
	"github.com/redfence/redfence/mutex"
	"github.com/redfence/redfence/mutex/backend"
	"github.com/redfence/redfence/pgdriver"
)

// driverOf is a Driver over pool in schema.
func driverOf(t *testing.T, pool *pgxpool.Pool, schema string, opts ...pgdriver.Option) *pgdriver.Driver {
	t.Helper()
	d, err := pgdriver.New(pool, append([]pgdriver.Option{pgdriver.WithSchema(schema)}, opts...)...)
	require.NoError(t, err)
	return d
}

// TestSemaphoreRules: the rules of backend.Semaphorer, one statement at a
// time: at most the limit of live holders, a retry gets its own token
// again, a release of a permit not held adds none, tokens rise across
// every grant, a lower limit takes no permit back, and a permit whose
// lease ran out comes back while its holder's release and renewal find it
// gone.
func TestSemaphoreRules(t *testing.T) {
	pool, schema := setup(t)
	ctx := t.Context()
	d := driverOf(t, pool, schema)
	const lease = time.Minute
	try := func(key, owner string, limit int, ttl time.Duration) backend.Grant {
		t.Helper()
		g, err := d.AcquirePermit(ctx, backend.PermitAttempt{Key: key, Owner: owner, TTL: ttl, Limit: limit})
		require.NoError(t, err)
		return g
	}
	holders := func(key string) (int, []string) {
		t.Helper()
		st, err := d.InspectSemaphore(ctx, key)
		require.NoError(t, err)
		var owners []string
		for _, h := range st.Holders {
			owners = append(owners, h.Owner)
			assert.Positive(t, h.Left, h.Owner)
		}
		return st.Limit, owners
	}
	release := func(key, owner string, token int64) bool {
		t.Helper()
		ok, err := d.ReleasePermit(ctx, backend.Lease{Key: key, Owner: owner, Token: token})
		require.NoError(t, err)
		return ok
	}

	limit, owners := holders("s")
	assert.Zero(t, limit, "no semaphore yet")
	assert.Empty(t, owners)
	a, b := try("s", "a", 2, lease), try("s", "b", 2, lease)
	require.Equal(t, backend.Acquired, a.Status)
	require.Equal(t, backend.Acquired, b.Status)
	assert.Greater(t, b.Token, a.Token)
	c := try("s", "c", 2, lease)
	require.Equal(t, backend.Held, c.Status, "a third holder of two permits")
	assert.Positive(t, c.Remaining)
	assert.LessOrEqual(t, c.Remaining, lease)
	assert.Equal(t, a, try("s", "a", 2, lease), "a retry is the same grant")
	assert.Equal(t, backend.Held, try("s", "c", 5, lease).Status, "the stored limit wins over an attempt's")

	require.True(t, release("s", "a", a.Token))
	require.False(t, release("s", "a", a.Token), "a second release")
	require.False(t, release("s", "b", b.Token+1), "another token")
	c = try("s", "c", 2, lease)
	require.Equal(t, backend.Acquired, c.Status)
	assert.Greater(t, c.Token, b.Token)
	assert.Equal(t, backend.Held, try("s", "d", 2, lease).Status, "a double release added a permit")
	limit, owners = holders("s")
	assert.Equal(t, 2, limit)
	assert.ElementsMatch(t, []string{"b", "c"}, owners)

	require.NoError(t, d.SetLimit(ctx, "s", 1))
	limit, owners = holders("s")
	assert.Equal(t, 1, limit)
	assert.ElementsMatch(t, []string{"b", "c"}, owners, "a lower limit takes no permit back")
	require.True(t, release("s", "b", b.Token))
	assert.Equal(t, backend.Held, try("s", "d", 2, lease).Status, "one holder of a limit of 1")
	require.True(t, release("s", "c", 0), "token 0 gives back whatever permit the owner has")
	d1 := try("s", "d", 2, lease)
	require.Equal(t, backend.Acquired, d1.Status)
	assert.Greater(t, d1.Token, c.Token)

	// A holder that stopped: its permit comes back once its lease ran out
	// on the database's clock, and not before (the attempts until then are
	// refused).
	const short = 300 * time.Millisecond
	x := try("k", "x", 1, short)
	require.Equal(t, backend.Acquired, x.Status)
	var y backend.Grant
	require.Eventually(t, func() bool {
		y = try("k", "y", 1, lease)
		if y.Status == backend.Held {
			assert.LessOrEqual(t, y.Remaining, short)
		}
		return y.Status == backend.Acquired
	}, 20*time.Second, 10*time.Millisecond)
	assert.Greater(t, y.Token, x.Token)
	rs, err := d.ExtendPermits(ctx, []backend.Lease{
		{Key: "k", Owner: "x", Token: x.Token, TTL: lease},
		{Key: "k", Owner: "y", Token: y.Token, TTL: lease},
		{Key: "s", Owner: "d", Token: d1.Token, TTL: lease},
		{Key: "none", Owner: "d", Token: d1.Token, TTL: lease},
	})
	require.NoError(t, err)
	assert.Equal(t, []backend.Renewal{backend.Gone, backend.Renewed, backend.Renewed, backend.Gone}, rs)
	assert.False(t, release("k", "x", x.Token), "the stopped holder's late release")
	_, owners = holders("k")
	assert.Equal(t, []string{"y"}, owners)
}

// TestSemaphoreAcrossLockers: goroutines of three Lockers, each its own
// pool and listening session, take permits of a semaphore of 2 in turn:
// never more than two at once, every token new, and a waiter is woken by
// another process's release and by a raised limit, not by a poll (it
// polls no sooner than its holders' leases, past its deadline).
func TestSemaphoreAcrossLockers(t *testing.T) {
	pool, schema := setup(t)
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	url := testutil.PostgresURL(t)
	const lease = 30 * time.Second
	var sems []*mutex.Semaphore
	for p := range 3 {
		l := listeningLocker(t, url, schema, fmt.Sprintf("sem-%d", p))
		// Polls no sooner than the lease: a waiter that is not woken
		// misses its deadline.
		s, err := mutex.NewSemaphore(l, "pool", 2, mutex.WithTTL(lease), mutex.WithRetry(lease, lease))
		require.NoError(t, err)
		sems = append(sems, s)
	}
	var live, most, over atomic.Int64
	var mu sync.Mutex
	tokens := map[int64]bool{}
	var wg sync.WaitGroup
	for i := range 6 {
		wg.Go(func() {
			s := sems[i%3]
			for range 4 {
				wctx, cancel := context.WithTimeout(ctx, lease/2)
				p, err := s.Acquire(wctx)
				cancel()
				if !assert.NoError(t, err) {
					return
				}
				n := live.Add(1)
				if n > 2 {
					over.Add(1)
				}
				for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
				}
				mu.Lock()
				assert.False(t, tokens[p.Token()], "token %d twice", p.Token())
				tokens[p.Token()] = true
				mu.Unlock()
				live.Add(-1)
				assert.NoError(t, p.Release(ctx))
			}
		})
	}
	wg.Wait()
	assert.Zero(t, over.Load(), "more than two permits at once")
	assert.Len(t, tokens, 24)

	p1, err := sems[0].Acquire(ctx)
	require.NoError(t, err)
	p2, err := sems[1].Acquire(ctx)
	require.NoError(t, err)
	_, err = sems[2].TryAcquire(ctx)
	require.ErrorIs(t, err, mutex.ErrNotAcquired)
	got := make(chan *mutex.Permit, 2)
	// wait starts a waiter and returns once its attempt was refused (it
	// stamped the semaphore's row): from then on it waits.
	wait := func() {
		t.Helper()
		var before time.Time
		stamp := `SELECT max(used_at) FROM ` + pgx.Identifier{schema, pgdriver.SemaphoresTable}.Sanitize()
		require.NoError(t, pool.QueryRow(ctx, stamp).Scan(&before))
		go func() {
			wctx, cancel := context.WithTimeout(ctx, lease/2)
			defer cancel()
			p, err := sems[2].Acquire(wctx)
			assert.NoError(t, err, "woken, not left to poll after the holders' leases")
			got <- p
		}()
		require.Eventually(t, func() bool {
			var at time.Time
			return pool.QueryRow(ctx, stamp).Scan(&at) == nil && at.After(before)
		}, 10*time.Second, time.Millisecond, "the waiter's attempt")
	}
	wait()
	require.NoError(t, p1.Release(ctx))
	p3 := <-got
	require.NotNil(t, p3)
	assert.Greater(t, p3.Token(), p2.Token())
	wait()
	require.NoError(t, sems[0].SetLimit(ctx, 3))
	p4 := <-got
	require.NotNil(t, p4)
	limit, hs, err := sems[1].Holders(ctx)
	require.NoError(t, err)
	assert.Equal(t, 3, limit)
	assert.Len(t, hs, 3)
	for _, p := range []*mutex.Permit{p2, p3, p4} {
		require.NoError(t, p.Release(ctx))
	}
}

// listeningLocker is a Locker over a pool of its own whose Driver listens
// for releases (WithListener), closed at Cleanup.
func listeningLocker(t *testing.T, url, schema, app string) *mutex.Locker {
	t.Helper()
	l, _, _ := lockerAt(t, url, schema, app, pgdriver.WithListener(url))
	return l
}

// TestHoldsBadInput: what Semaphorer and RWLocker refuse before sending
// anything (the Driver's pool is closed: a statement would fail otherwise).
func TestHoldsBadInput(t *testing.T) {
	pool, err := pgxpool.New(t.Context(), testutil.PostgresURL(t))
	require.NoError(t, err)
	pool.Close()
	d, err := pgdriver.New(pool)
	require.NoError(t, err)
	ctx := t.Context()
	for name, err := range map[string]error{
		"limit 0": func() error {
			_, err := d.AcquirePermit(ctx, backend.PermitAttempt{Key: "k", Owner: "o", TTL: time.Second})
			return err
		}(),
		"permit lease under 1ms": func() error {
			_, err := d.AcquirePermit(ctx, backend.PermitAttempt{Key: "k", Owner: "o", TTL: time.Microsecond, Limit: 1})
			return err
		}(),
		"set limit 0": d.SetLimit(ctx, "k", 0),
		"read-write lease under 1ms": func() error {
			_, err := d.AcquireRW(ctx, backend.RWAttempt{Key: "k", Owner: "o"})
			return err
		}(),
		"downgrade lease under 1ms": func() error {
			_, err := d.DowngradeRW(ctx, backend.Lease{Key: "k", Owner: "o", Token: 1})
			return err
		}(),
	} {
		assert.ErrorIs(t, err, pgdriver.ErrInvalid, name)
	}
}

// TestListenerHeardAfterLostSession: a release while the waiter's
// listening session is gone (its backend terminated, before the listener
// connects again) still wakes the waiter, which polls no sooner than a
// minute: the listener wakes every watch once it listens again. The
// round where the release falls in that gap is found by watching the
// session come back; the kills before it also exercise the reconnection.
func TestListenerHeardAfterLostSession(t *testing.T) {
	pool, schema := setup(t)
	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	url := testutil.PostgresURL(t)
	const long = time.Minute
	opts := []mutex.LockOption{mutex.WithTTL(long), mutex.WithRetry(long, long)}
	holderSem, err := mutex.NewSemaphore(listeningLocker(t, url, schema, "gap-holder"), "gap", 1, opts...)
	require.NoError(t, err)
	waiterSem, err := mutex.NewSemaphore(listeningLocker(t, url, schema, "gap-waiter"), "gap", 1, opts...)
	require.NoError(t, err)
	listen := `LISTEN ` + pgx.Identifier{schema + "." + pgdriver.Table}.Sanitize()
	// listeners are the pids of the sessions listening on the schema's channel.
	listeners := func() []int {
		rows, err := pool.Query(ctx, `SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND query = $1`, listen)
		require.NoError(t, err)
		pids, err := pgx.CollectRows(rows, pgx.RowTo[int])
		require.NoError(t, err)
		return pids
	}
	stamp := `SELECT used_at FROM ` + pgx.Identifier{schema, pgdriver.SemaphoresTable}.Sanitize()
	stamped := func() (at time.Time) {
		require.NoError(t, pool.QueryRow(ctx, stamp).Scan(&at))
		return at
	}
	gaps := 0
	for round := 0; round < 20 && gaps < 3; round++ {
		held, err := holderSem.Acquire(ctx)
		require.NoError(t, err)
		before := stamped()
		got := make(chan *mutex.Permit, 1)
		go func() {
			wctx, cancel := context.WithTimeout(ctx, long/2)
			defer cancel()
			p, err := waiterSem.Acquire(wctx)
			assert.NoError(t, err, "round %d: woken after the lost session, not left to poll", round)
			got <- p
		}()
		require.Eventually(t, func() bool { return stamped().After(before) && len(listeners()) == 1 }, 10*time.Second, time.Millisecond,
			"the waiter's refused attempt, its session listening")
		// End every listening session; the waiter is woken by the loss,
		// tries, is refused (its stamp), and waits for the next session.
		before = stamped()
		old := listeners()
		_, err = pool.Exec(ctx, `SELECT pg_terminate_backend(pid) FROM unnest($1::int[]) AS pid`, old)
		require.NoError(t, err)
		require.Eventually(t, func() bool { return stamped().After(before) }, 10*time.Second, time.Millisecond, "the attempt after the loss")
		back := false
		for _, pid := range listeners() {
			back = back || !slices.Contains(old, pid)
		}
		if !back {
			gaps++ // released while nobody listens
		}
		require.NoError(t, held.Release(ctx))
		p := <-got
		require.NotNil(t, p)
		require.NoError(t, p.Release(ctx))
	}
	require.Positive(t, gaps, "no release fell between a lost session and the next")
}

// TestHoldsRacers: eight callers at once, each on a pool of its own, on a
// semaphore of 2 and a read-write lock that exist already (no insert to
// wait on): never more grants than the limit, never a writer beside
// another grant. Each round's grants stay held until every caller
// answered.
func TestHoldsRacers(t *testing.T) {
	pool, schema := setup(t)
	ctx := t.Context()
	url := testutil.PostgresURL(t)
	var ds []*pgdriver.Driver
	for range 8 {
		p, err := pgxpool.New(ctx, url)
		require.NoError(t, err)
		t.Cleanup(p.Close)
		ds = append(ds, driverOf(t, p, schema))
	}
	d := driverOf(t, pool, schema)
	_, err := d.AcquirePermit(ctx, backend.PermitAttempt{Key: "race", Owner: "seed", TTL: time.Minute, Limit: 2})
	require.NoError(t, err)
	_, err = d.AcquireRW(ctx, backend.RWAttempt{Key: "race", Owner: "seed", TTL: time.Minute})
	require.NoError(t, err)
	for _, l := range []backend.Lease{{Key: "race", Owner: "seed"}} {
		_, err = d.ReleasePermit(ctx, l)
		require.NoError(t, err)
		_, err = d.ReleaseRW(ctx, l)
		require.NoError(t, err)
	}
	for round := range 30 {
		var wg sync.WaitGroup
		permits := make([]backend.Grant, len(ds))
		holds := make([]backend.Grant, len(ds))
		for i, dr := range ds {
			wg.Go(func() {
				owner := fmt.Sprintf("r%d-%d", round, i)
				var err error
				permits[i], err = dr.AcquirePermit(ctx, backend.PermitAttempt{Key: "race", Owner: owner, TTL: time.Minute, Limit: 2})
				assert.NoError(t, err)
				holds[i], err = dr.AcquireRW(ctx, backend.RWAttempt{Key: "race", Owner: owner, TTL: time.Minute, Write: i%2 == 0})
				assert.NoError(t, err)
			})
		}
		wg.Wait()
		granted, writers, readers := 0, 0, 0
		for i := range ds {
			if permits[i].Status == backend.Acquired {
				granted++
			}
			if holds[i].Status == backend.Acquired {
				if i%2 == 0 {
					writers++
				} else {
					readers++
				}
			}
		}
		require.LessOrEqual(t, granted, 2, "round %d: permits", round)
		require.Positive(t, granted, "round %d: permits", round)
		require.False(t, writers > 1 || writers == 1 && readers > 0, "round %d: %d writers beside %d readers", round, writers, readers)
		for i := range ds {
			l := backend.Lease{Key: "race", Owner: fmt.Sprintf("r%d-%d", round, i)}
			_, err := d.ReleasePermit(ctx, l)
			require.NoError(t, err)
			_, err = d.ReleaseRW(ctx, l)
			require.NoError(t, err)
		}
	}
}

// TestHoldsExpireWithoutOtherCalls: a permit's and a read-write hold's
// lease runs out with no other call on the key; the holder's own renewal
// and release then find them gone (each call takes the expired holds out
// first), and a writer's clean-up release (token 0) ends its write.
func TestHoldsExpireWithoutOtherCalls(t *testing.T) {
	pool, schema := setup(t)
	ctx := t.Context()
	d := driverOf(t, pool, schema)
	const short = 200 * time.Millisecond
	p, err := d.AcquirePermit(ctx, backend.PermitAttempt{Key: "e", Owner: "x", TTL: short, Limit: 1})
	require.NoError(t, err)
	w, err := d.AcquireRW(ctx, backend.RWAttempt{Key: "e", Owner: "x", TTL: short, Write: true})
	require.NoError(t, err)
	r, err := d.AcquireRW(ctx, backend.RWAttempt{Key: "f", Owner: "x", TTL: short})
	require.NoError(t, err)
	// Wait for the database's clock, not this one's: the holds are gone
	// once a read-only look finds no live one.
	require.Eventually(t, func() bool {
		s, err1 := d.InspectSemaphore(ctx, "e")
		e, err2 := d.InspectRW(ctx, "e")
		f, err3 := d.InspectRW(ctx, "f")
		return err1 == nil && err2 == nil && err3 == nil && len(s.Holders) == 0 && e.Writer == nil && len(f.Readers) == 0
	}, 20*time.Second, 10*time.Millisecond)
	ps, err := d.ExtendPermits(ctx, []backend.Lease{{Key: "e", Owner: "x", Token: p.Token, TTL: time.Minute}})
	require.NoError(t, err)
	assert.Equal(t, []backend.Renewal{backend.Gone}, ps, "an expired permit renewed")
	rs, err := d.ExtendRW(ctx, []backend.Lease{{Key: "e", Owner: "x", Token: w.Token, TTL: time.Minute}, {Key: "f", Owner: "x", Token: r.Token, TTL: time.Minute}})
	require.NoError(t, err)
	assert.Equal(t, []backend.Renewal{backend.Gone, backend.Gone}, rs, "an expired hold renewed")
	ok, err := d.ReleasePermit(ctx, backend.Lease{Key: "e", Owner: "x", Token: p.Token})
	require.NoError(t, err)
	assert.False(t, ok, "an expired permit released")
	ok, err = d.ReleaseRW(ctx, backend.Lease{Key: "f", Owner: "x", Token: r.Token})
	require.NoError(t, err)
	assert.False(t, ok, "an expired read released")

	w, err = d.AcquireRW(ctx, backend.RWAttempt{Key: "e", Owner: "y", TTL: time.Minute, Write: true})
	require.NoError(t, err)
	require.Equal(t, backend.Acquired, w.Status)
	ok, err = d.ReleaseRW(ctx, backend.Lease{Key: "e", Owner: "y"})
	require.NoError(t, err)
	assert.True(t, ok, "a writer's clean-up release")
	st, err := d.InspectRW(ctx, "e")
	require.NoError(t, err)
	assert.Nil(t, st.Writer)
}

// TestHoldsNeedReadCommitted: on a session at REPEATABLE READ, where a
// statement's snapshot would predate the row lock it waited for, the
// functions refuse to run, with an error that says so and is not
// ErrUnavailable (retrying will not help).
func TestHoldsNeedReadCommitted(t *testing.T) {
	_, schema := setup(t)
	ctx := t.Context()
	cfg, err := pgxpool.ParseConfig(testutil.PostgresURL(t))
	require.NoError(t, err)
	cfg.ConnConfig.RuntimeParams["default_transaction_isolation"] = "repeatable read"
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	d := driverOf(t, pool, schema)
	_, err = d.AcquirePermit(ctx, backend.PermitAttempt{Key: "k", Owner: "o", TTL: time.Minute, Limit: 1})
	assert.ErrorContains(t, err, "need READ COMMITTED")
	assert.NotErrorIs(t, err, mutex.ErrUnavailable)
	_, err = d.AcquireRW(ctx, backend.RWAttempt{Key: "k", Owner: "o", TTL: time.Minute})
	assert.ErrorContains(t, err, "need READ COMMITTED")
	assert.NotErrorIs(t, err, mutex.ErrUnavailable)
}
