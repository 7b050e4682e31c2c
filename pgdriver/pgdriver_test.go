package pgdriver_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redfence/redfence/internal/localpg"
	"github.com/redfence/redfence/internal/testutil"
	"github.com/redfence/redfence/mutex"
	"github.com/redfence/redfence/pgdriver"
)

var schemas atomic.Int64

// setup returns a pool of the package database and a migrated schema of
// the test's own.
func setup(t *testing.T) (*pgxpool.Pool, string) {
	t.Helper()
	pool := testutil.Postgres(t)
	schema := fmt.Sprintf("pgdriver_%d", schemas.Add(1))
	d, err := pgdriver.New(pool, pgdriver.WithSchema(schema))
	require.NoError(t, err)
	require.NoError(t, d.Migrate(t.Context()))
	return pool, schema
}

// locker is a Locker over a pool of its own (another process, as far as
// the database can tell), closed at Cleanup.
func locker(t *testing.T, schema, app string) (*mutex.Locker, *pgdriver.Driver, *pgxpool.Pool) {
	t.Helper()
	return lockerAt(t, testutil.PostgresURL(t), schema, app)
}

// lockerAt is locker over the server at url, its Driver with opts.
func lockerAt(t *testing.T, url, schema, app string, opts ...pgdriver.Option) (*mutex.Locker, *pgdriver.Driver, *pgxpool.Pool) {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(url)
	require.NoError(t, err)
	cfg.ConnConfig.RuntimeParams["application_name"] = app
	pool, err := pgxpool.NewWithConfig(t.Context(), cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	d := driverOf(t, pool, schema, opts...)
	l, err := mutex.New(d)
	require.NoError(t, err)
	t.Cleanup(func() { _ = l.Close() })
	return l, d, pool
}

// TestExclusionAndIncreasingTokens: Lockers of three processes take one
// key in turn; never two at once, and each holder's token is above every
// earlier one.
func TestExclusionAndIncreasingTokens(t *testing.T) {
	_, schema := setup(t)
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	var lockers []*mutex.Locker
	for p := range 3 {
		l, _, _ := locker(t, schema, fmt.Sprintf("excl-%d", p))
		lockers = append(lockers, l)
	}
	tokens := takeTurns(t, ctx, lockers, 2, 4)
	require.Len(t, tokens, 24)
	for i := 1; i < len(tokens); i++ {
		assert.Greater(t, tokens[i], tokens[i-1], "token %d", i)
	}
}

// TestCheckRefusesAStalledHolder: a holder that stalled past its lease has
// its write refused inside its own transaction; the new holder's commits.
func TestCheckRefusesAStalledHolder(t *testing.T) {
	pool, schema := setup(t)
	ctx := t.Context()
	_, err := pool.Exec(ctx, fmt.Sprintf(`CREATE TABLE %s (who text)`, pgx.Identifier{schema, "ledger"}.Sanitize()))
	require.NoError(t, err)
	a, da, poolA := locker(t, schema, "stalled")
	b, db, poolB := locker(t, schema, "next")
	stalled, err := a.Lock(ctx, "acct", mutex.WithTTL(300*time.Millisecond), mutex.WithAutoRenew(false))
	require.NoError(t, err)
	next, err := b.Lock(ctx, "acct") // waits for the stalled lease to run out
	require.NoError(t, err)
	require.Greater(t, next.Token(), stalled.Token())

	ledger := pgx.Identifier{schema, "ledger"}.Sanitize()
	write := func(pool *pgxpool.Pool, d *pgdriver.Driver, h pgdriver.Held, who string) error {
		return checkedWrite(t, ctx, pool, d, h, ledger, who)
	}
	require.ErrorIs(t, write(poolA, da, stalled, "stalled"), pgdriver.ErrNotHeld)
	require.NoError(t, write(poolB, db, next, "next"))
	var who []string
	rows, err := pool.Query(ctx, fmt.Sprintf(`SELECT who FROM %s`, pgx.Identifier{schema, "ledger"}.Sanitize()))
	require.NoError(t, err)
	who, err = pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	assert.Equal(t, []string{"next"}, who)
	require.NoError(t, next.Release(ctx))

}

// TestAcquireWaitsForACheckedTransaction: while a transaction that checked
// a hold is open, a competing acquisition waits for it, even once the
// lease ran out on the database's clock, and takes the key only after the
// commit.
func TestAcquireWaitsForACheckedTransaction(t *testing.T) {
	pool, schema := setup(t)
	ctx := t.Context()
	a, da, poolA := locker(t, schema, "checker")
	b, _, _ := locker(t, schema, "competitor")
	lk, err := a.Lock(ctx, "row", mutex.WithTTL(300*time.Millisecond), mutex.WithAutoRenew(false))
	require.NoError(t, err)
	tx, err := poolA.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }()
	require.NoError(t, da.Check(ctx, tx, lk))

	table := pgx.Identifier{schema, pgdriver.Table}.Sanitize()
	require.Eventually(t, func() bool {
		var over bool
		return pool.QueryRow(ctx, `SELECT expires_at < clock_timestamp() FROM `+table+` WHERE key = 'row'`).Scan(&over) == nil && over
	}, 10*time.Second, time.Millisecond, "the lease ran out on the database's clock")

	got := tryBlocked(t, pool, b, "row", "competitor")
	require.NoError(t, tx.Commit(ctx))
	lk2 := <-got
	require.NotNil(t, lk2)
	assert.Greater(t, lk2.Token(), lk.Token())
	require.NoError(t, lk2.Release(ctx))
}

// TestHolderConnectionKilled: the holder's connections killed
// (pg_terminate_backend) leave its lock held: no session state carries it,
// so it renews and releases over new connections, and another takes the
// key only after the release.
func TestHolderConnectionKilled(t *testing.T) {
	pool, schema := setup(t)
	ctx := t.Context()
	a, _, _ := locker(t, schema, "killed")
	b, _, _ := locker(t, schema, "other")
	lk, err := a.Lock(ctx, "job")
	require.NoError(t, err)
	var n int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = 'killed'`).Scan(&n))
	require.Positive(t, n, "the holder's connections were killed")
	_, err = b.TryLock(ctx, "job")
	require.ErrorIs(t, err, mutex.ErrNotAcquired, "still held")
	require.Eventually(t, func() bool { return lk.Extend(ctx, 10*time.Second) == nil }, 10*time.Second, time.Millisecond,
		"it renews over a new connection")
	require.NoError(t, lk.Context().Err())
	require.NoError(t, lk.Release(ctx))
	lk2, err := b.TryLock(ctx, "job")
	require.NoError(t, err)
	assert.Greater(t, lk2.Token(), lk.Token())
	require.NoError(t, lk2.Release(ctx))
}

// TestMigrateConcurrently: replicas starting together may all run
// Migrate: every call succeeds and the table works.
func TestMigrateConcurrently(t *testing.T) {
	pool := testutil.Postgres(t)
	schema := fmt.Sprintf("pgdriver_m%d", schemas.Add(1))
	d, err := pgdriver.New(pool, pgdriver.WithSchema(schema))
	require.NoError(t, err)
	var wg sync.WaitGroup
	errs := make([]error, 8)
	for i := range errs {
		wg.Go(func() { errs[i] = d.Migrate(t.Context()) })
	}
	wg.Wait()
	for i, err := range errs {
		assert.NoError(t, err, "replica %d", i)
	}
	l, err := mutex.New(d)
	require.NoError(t, err)
	defer l.Close()
	lk, err := l.TryLock(t.Context(), "after")
	require.NoError(t, err)
	require.NoError(t, lk.Release(t.Context()))
}

// TestBadInput: refused before any statement, matching mutex.ErrInvalid.
func TestBadInput(t *testing.T) {
	var nilPool *pgxpool.Pool
	for _, tc := range []struct {
		name string
		err  func() error
	}{
		{"nil db", func() error { _, err := pgdriver.New(nil); return err }},
		{"typed nil db", func() error { _, err := pgdriver.New(nilPool); return err }},
		{"empty schema", func() error { _, err := pgdriver.New(testutil.Postgres(t), pgdriver.WithSchema("")); return err }},
		{"NUL in schema", func() error { _, err := pgdriver.New(testutil.Postgres(t), pgdriver.WithSchema("a\x00b")); return err }},
		{"Check: nil hold", func() error {
			d, err := pgdriver.New(testutil.Postgres(t))
			require.NoError(t, err)
			tx, err := testutil.Postgres(t).Begin(t.Context())
			require.NoError(t, err)
			defer func() { _ = tx.Rollback(t.Context()) }()
			return d.Check(t.Context(), tx, nil)
		}},
	} {
		err := tc.err()
		assert.ErrorIs(t, err, mutex.ErrInvalid, tc.name)
		assert.True(t, errors.Is(err, pgdriver.ErrInvalid), tc.name)
	}
}

// TestThroughPgBouncer: behind PgBouncer in transaction mode, where no
// session outlives a transaction, Lockers of three processes still exclude
// each other with increasing tokens, Check still refuses a stalled holder
// inside its own transaction while the new holder's commits, and
// semaphores and read-write locks work.
func TestThroughPgBouncer(t *testing.T) {
	pool, schema := setup(t)
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	url := testutil.PgBouncer(t, testutil.PostgresURL(t))
	var lockers []*mutex.Locker
	for p := range 3 {
		l, _, _ := lockerAt(t, url, schema, fmt.Sprintf("bouncer-%d", p))
		lockers = append(lockers, l)
	}
	tokens := takeTurns(t, ctx, lockers, 1, 4)
	require.Len(t, tokens, 12)
	for i := 1; i < len(tokens); i++ {
		assert.Greater(t, tokens[i], tokens[i-1], "token %d", i)
	}

	ledger := pgx.Identifier{schema, "bounced"}.Sanitize()
	_, err := pool.Exec(ctx, `CREATE TABLE `+ledger+` (who text)`)
	require.NoError(t, err)
	a, da, poolA := lockerAt(t, url, schema, "bouncer-stalled")
	b, db, poolB := lockerAt(t, url, schema, "bouncer-next")
	stalled, err := a.Lock(ctx, "acct", mutex.WithTTL(300*time.Millisecond), mutex.WithAutoRenew(false))
	require.NoError(t, err)
	next, err := b.Lock(ctx, "acct")
	require.NoError(t, err)
	write := func(pool *pgxpool.Pool, d *pgdriver.Driver, h pgdriver.Held, who string) error {
		return checkedWrite(t, ctx, pool, d, h, ledger, who)
	}
	require.ErrorIs(t, write(poolA, da, stalled, "stalled"), pgdriver.ErrNotHeld)
	require.NoError(t, write(poolB, db, next, "next"))
	rows, err := pool.Query(ctx, `SELECT who FROM `+ledger)
	require.NoError(t, err)
	who, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	assert.Equal(t, []string{"next"}, who)
	require.NoError(t, next.Release(ctx))

	// Semaphores and read-write locks are one function call a statement.
	sem, err := mutex.NewSemaphore(a, "permits", 1)
	require.NoError(t, err)
	p, err := sem.Acquire(ctx)
	require.NoError(t, err)
	_, err = sem.TryAcquire(ctx)
	require.ErrorIs(t, err, mutex.ErrNotAcquired)
	require.NoError(t, p.Release(ctx))
	rw, err := mutex.NewRWMutex(b, "doc")
	require.NoError(t, err)
	w, err := rw.Lock(ctx)
	require.NoError(t, err)
	require.NoError(t, w.Downgrade(ctx))
	require.NoError(t, w.Release(ctx))
}

// TestListenerWakesAWaiter: with WithListener, a waiter of another process
// takes a released key at once, long before the poll the holder's lease
// would set (its Lock's deadline is half that lease); without it, the
// Driver is no Watcher and waiters poll.
func TestListenerWakesAWaiter(t *testing.T) {
	pool, schema := setup(t)
	ctx := t.Context()
	url := testutil.PostgresURL(t)
	holder, _, _ := locker(t, schema, "holder")
	wpool, err := pgxpool.New(ctx, url)
	require.NoError(t, err)
	t.Cleanup(wpool.Close)
	d, err := pgdriver.New(wpool, pgdriver.WithSchema(schema), pgdriver.WithListener(url))
	require.NoError(t, err)
	assert.True(t, d.Watching())
	waiter, err := mutex.New(d)
	require.NoError(t, err)
	t.Cleanup(func() { _ = waiter.Close() })

	const lease = 20 * time.Second
	lk, err := holder.Lock(ctx, "woken", mutex.WithTTL(lease))
	require.NoError(t, err)
	got := make(chan error, 1)
	go func() {
		wctx, cancel := context.WithTimeout(ctx, lease/2)
		defer cancel()
		lk2, err := waiter.Lock(wctx, "woken")
		if err == nil {
			err = lk2.Release(ctx)
		}
		got <- err
	}()
	require.Eventually(t, func() bool {
		var n int
		return pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE query LIKE 'LISTEN %'`).Scan(&n) == nil && n >= 1
	}, 10*time.Second, time.Millisecond, "the waiter's Driver listens")
	require.NoError(t, lk.Release(ctx))
	require.NoError(t, <-got, "woken by the release, not by a poll after the lease")

	plain, err := pgdriver.New(wpool)
	require.NoError(t, err)
	assert.False(t, plain.Watching(), "no listener: the Locker polls")
}

// TestPostgresRestart: PostgreSQL restarted while a lock is held and
// contended. The lease is in a committed row, so the holder keeps its lock
// (or, if the restart outlasts it, loses it and says so); the waiter gets
// the key only once the holder released or lost it, with a higher token.
func TestPostgresRestart(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	srv, err := localpg.Start(ctx)
	require.NoError(t, err, localpg.Install)
	t.Cleanup(srv.Stop)
	pools := make([]*pgxpool.Pool, 2)
	lockers := make([]*mutex.Locker, 2)
	for i := range pools {
		cfg, err := pgxpool.ParseConfig(srv.URL())
		require.NoError(t, err)
		cfg.ConnConfig.ConnectTimeout = time.Second
		pools[i], err = pgxpool.NewWithConfig(ctx, cfg)
		require.NoError(t, err)
		t.Cleanup(pools[i].Close)
		d, err := pgdriver.New(pools[i])
		require.NoError(t, err)
		require.NoError(t, d.Migrate(ctx))
		lockers[i], err = mutex.New(d)
		require.NoError(t, err)
		t.Cleanup(func() { _ = lockers[i].Close() })
	}
	lk, err := lockers[0].Lock(ctx, "k", mutex.WithTTL(3*time.Second))
	require.NoError(t, err)
	var released atomic.Bool
	type got struct {
		token    int64
		holderOK bool // the holder had released or lost the lock by then
		err      error
	}
	waiter := make(chan got, 1)
	go func() {
		lk2, err := lockers[1].Lock(ctx, "k")
		if err != nil {
			waiter <- got{err: err}
			return
		}
		waiter <- got{token: lk2.Token(), holderOK: released.Load() || lk.Context().Err() != nil}
		_ = lk2.Release(ctx)
	}()
	require.NoError(t, srv.Restart(ctx))
	// The holder's lease is the row's: a renewal after the restart finds it
	// held unless the lease ran out meanwhile.
	require.Eventually(t, func() bool {
		return lk.Context().Err() != nil || lk.Extend(ctx, 3*time.Second) == nil
	}, 30*time.Second, 10*time.Millisecond, "the holder renews again or knows it lost the lock")
	released.Store(true)
	if err := lk.Release(ctx); err != nil {
		require.ErrorIs(t, err, mutex.ErrNotHeld)
	}
	g := <-waiter
	require.NoError(t, g.err)
	assert.True(t, g.holderOK, "the waiter took the key while the holder still held it")
	assert.Greater(t, g.token, lk.Token())
}

// takeTurns has goroutines on each of lockers take key rounds times in
// turn, asserting that no two hold it at once, and returns the holders'
// tokens in the order they held it.
func takeTurns(t *testing.T, ctx context.Context, lockers []*mutex.Locker, goroutines, rounds int) []int64 {
	t.Helper()
	var inside atomic.Int64
	var mu sync.Mutex
	var tokens []int64
	var wg sync.WaitGroup
	for _, l := range lockers {
		for range goroutines {
			wg.Go(func() {
				for range rounds {
					lk, err := l.Lock(ctx, "k", mutex.WithTTL(300*time.Millisecond))
					if !assert.NoError(t, err) {
						return
					}
					assert.EqualValues(t, 1, inside.Add(1), "two holders at once")
					mu.Lock()
					tokens = append(tokens, lk.Token())
					mu.Unlock()
					inside.Add(-1)
					assert.NoError(t, lk.Release(ctx))
				}
			})
		}
	}
	wg.Wait()
	return tokens
}

// checkedWrite inserts who into table in a transaction of pool that d
// checks h in first: Check's error, or the commit's.
func checkedWrite(t *testing.T, ctx context.Context, pool *pgxpool.Pool, d *pgdriver.Driver, h pgdriver.Held, table, who string) error {
	t.Helper()
	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }()
	if err := d.Check(ctx, tx, h); err != nil {
		return err
	}
	_, err = tx.Exec(ctx, `INSERT INTO `+table+` VALUES ($1)`, who)
	require.NoError(t, err)
	return tx.Commit(ctx)
}

// tryBlocked starts l.TryLock(key) and returns once the database shows
// l's connections (application_name app) waiting on a row lock, having
// failed the test if the Lock came first; it arrives on the channel once
// the row is let go.
func tryBlocked(t *testing.T, pool *pgxpool.Pool, l *mutex.Locker, key, app string) <-chan *mutex.Lock {
	t.Helper()
	ctx := t.Context()
	got := make(chan *mutex.Lock, 1)
	go func() {
		lk, err := l.TryLock(ctx, key)
		assert.NoError(t, err)
		got <- lk
	}()
	require.Eventually(t, func() bool {
		var n int
		return pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE application_name = $1 AND wait_event_type = 'Lock'`, app).Scan(&n) == nil && n == 1
	}, 10*time.Second, time.Millisecond, "%s waits on the row of %q", app, key)
	select {
	case <-got:
		t.Fatalf("%s took %q under an open transaction that row-locks it", app, key)
	default:
	}
	return got
}

// TestMigrateWithoutCreatePrivilege: a service's role that may use the
// tables but create nothing can run Migrate at every start once the tables
// are there; with one missing, Migrate says PostgreSQL refused it.
func TestMigrateWithoutCreatePrivilege(t *testing.T) {
	pool, schema := setup(t)
	ctx := t.Context()
	role := fmt.Sprintf("redfence_noddl_%d_%d", os.Getpid(), schemas.Add(1)) // roles are the cluster's, not the database's
	for _, s := range []string{
		`CREATE ROLE ` + role + ` LOGIN`,
		`GRANT USAGE ON SCHEMA ` + schema + ` TO ` + role,
		`GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA ` + schema + ` TO ` + role,
	} {
		_, err := pool.Exec(ctx, s)
		require.NoError(t, err, s)
	}
	t.Cleanup(func() {
		bg := context.WithoutCancel(ctx)
		_, _ = pool.Exec(bg, `DROP OWNED BY `+role)
		_, _ = pool.Exec(bg, `DROP ROLE `+role)
	})
	cfg, err := pgxpool.ParseConfig(testutil.PostgresURL(t))
	require.NoError(t, err)
	cfg.ConnConfig.User = role
	rpool, err := pgxpool.NewWithConfig(ctx, cfg)
	require.NoError(t, err)
	t.Cleanup(rpool.Close)
	d, err := pgdriver.New(rpool, pgdriver.WithSchema(schema))
	require.NoError(t, err)
	require.NoError(t, d.Migrate(ctx), "every table is there: nothing to create")
	l, err := mutex.New(d)
	require.NoError(t, err)
	t.Cleanup(func() { _ = l.Close() })
	lk, err := l.TryLock(ctx, "k")
	require.NoError(t, err, "the role can take locks")
	require.NoError(t, lk.Release(ctx))

	_, err = pool.Exec(ctx, `DROP TABLE `+pgx.Identifier{schema, pgdriver.ForcedTable}.Sanitize())
	require.NoError(t, err)
	err = d.Migrate(ctx)
	var pgErr *pgconn.PgError
	require.ErrorAs(t, err, &pgErr, "a table to create, and no privilege to")
	assert.Equal(t, "42501", pgErr.Code, "insufficient_privilege: %v", err)
}

// TestLongSchemaName: a schema of 63 bytes, the most PostgreSQL takes,
// still has a channel (an identifier of 63 bytes at most): a release
// commits, and NOTIFYs a waiter of another process that polls no sooner
// than a minute.
func TestLongSchemaName(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	pool := testutil.Postgres(t)
	schema := fmt.Sprintf("pgdriver_long_%d_%s", schemas.Add(1), strings.Repeat("s", 63))[:63]
	require.NoError(t, driverOf(t, pool, schema).Migrate(ctx))
	url := testutil.PostgresURL(t)
	holder, waiter := listeningLocker(t, url, schema, "long-holder"), listeningLocker(t, url, schema, "long-waiter")
	lk, err := holder.Lock(ctx, "k", mutex.WithTTL(time.Minute))
	require.NoError(t, err)
	got := make(chan error, 1)
	go func() {
		lk2, err := waiter.Lock(ctx, "k", mutex.WithRetry(time.Minute, time.Minute))
		if err == nil {
			err = lk2.Release(ctx)
		}
		got <- err
	}()
	require.NoError(t, lk.Release(ctx))
	require.NoError(t, <-got)
}
