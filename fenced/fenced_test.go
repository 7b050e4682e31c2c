package fenced_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sort"
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

	"github.com/redfence/redfence/fenced"
	"github.com/redfence/redfence/internal/testutil"
	"github.com/redfence/redfence/mutex"
	"github.com/redfence/redfence/pgdriver"
)

var tableSeq atomic.Int64

// setup gives each test its own fence table and data table in the package
// database, so tests cannot see each other's tokens.
func setup(t *testing.T, opts ...fenced.Option) (*pgxpool.Pool, *fenced.Guard, string, string) {
	t.Helper()
	pool := testutil.Postgres(t)
	n := tableSeq.Add(1)
	fences := fmt.Sprintf("fences_%s_%d", sanitize(t.Name()), n)
	data := fmt.Sprintf("data_%s_%d", sanitize(t.Name()), n)
	g := newGuard(t, pool, append([]fenced.Option{fenced.WithTable(fences)}, opts...)...)
	ctx := context.Background()
	require.NoError(t, g.Migrate(ctx))
	_, err := pool.Exec(ctx, `CREATE TABLE `+data+` (id bigserial PRIMARY KEY, resource text NOT NULL, token bigint NOT NULL, tag text NOT NULL, seq bigint NOT NULL DEFAULT 0)`)
	require.NoError(t, err)
	return pool, g, fences, data
}

// newGuard is fenced.New for input it must accept: an error fails the test.
func newGuard(t testing.TB, db fenced.Beginner, opts ...fenced.Option) *fenced.Guard {
	t.Helper()
	g, err := fenced.New(db, opts...)
	require.NoError(t, err)
	require.NotNil(t, g)
	return g
}

func sanitize(s string) string {
	b := []byte(strings.ToLower(s))
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') {
			b[i] = '_'
		}
	}
	if len(b) > 30 {
		b = b[:30]
	}
	return string(b)
}

func insert(data, resource string, token int64, tag string) func(context.Context, pgx.Tx) error {
	return func(ctx context.Context, tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `INSERT INTO `+data+` (resource, token, tag) VALUES ($1, $2, $3)`, resource, token, tag)
		return err
	}
}

func tags(t *testing.T, pool *pgxpool.Pool, data string) []string {
	t.Helper()
	rows, err := pool.Query(context.Background(), `SELECT tag FROM `+data+` ORDER BY id`)
	require.NoError(t, err)
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	return out
}

func TestStaleTokenRejected(t *testing.T) {
	pool, g, _, data := setup(t)
	ctx := context.Background()

	require.NoError(t, g.Do(ctx, "acct-1", 5, insert(data, "acct-1", 5, "first")))

	called := false
	err := g.Do(ctx, "acct-1", 3, func(ctx context.Context, tx pgx.Tx) error {
		called = true
		return insert(data, "acct-1", 3, "stale")(ctx, tx)
	})
	require.ErrorIs(t, err, fenced.ErrStaleToken)
	var stale *fenced.StaleTokenError
	require.ErrorAs(t, err, &stale)
	assert.Equal(t, fenced.StaleTokenError{Resource: "acct-1", Token: 3, Highest: 5}, *stale)
	assert.False(t, called, "fn must not run for a stale token")

	// The same holder writing again with its token is fine.
	require.NoError(t, g.Do(ctx, "acct-1", 5, insert(data, "acct-1", 5, "again")))
	// Another resource has its own fence.
	require.NoError(t, g.Do(ctx, "acct-2", 1, insert(data, "acct-2", 1, "other")))

	assert.Equal(t, []string{"first", "again", "other"}, tags(t, pool, data))
}

// TestPausedHolderIsFenced: holder A stalls past its lease (a GC pause), B
// takes the lock with a larger token and writes, and A's late write, the
// one fenced exists to stop, is rejected: the data shows only B's.
func TestPausedHolderIsFenced(t *testing.T) {
	pool, g, _, data := setup(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	// The lock is pgdriver's, in the same database: the fence refuses A's
	// write whichever store issued the tokens.
	schema := "fenced_locks_" + sanitize(t.Name())
	_, err := pool.Exec(ctx, "CREATE SCHEMA IF NOT EXISTS "+schema)
	require.NoError(t, err)
	locker := func() *mutex.Locker {
		d, err := pgdriver.New(pool, pgdriver.WithSchema(schema))
		require.NoError(t, err)
		require.NoError(t, d.Migrate(ctx))
		return testutil.WithBackend(t, d)
	}
	la, lb := locker(), locker()

	a, err := la.Lock(ctx, "ledger:42", mutex.WithTTL(200*time.Millisecond), mutex.WithAutoRenew(false))
	require.NoError(t, err)
	// A "pauses": it does nothing until its lease has run out.
	<-a.Context().Done()
	require.ErrorIs(t, context.Cause(a.Context()), mutex.ErrLockLost)

	b, err := lb.Lock(ctx, "ledger:42")
	require.NoError(t, err)
	require.Greater(t, b.Token(), a.Token())
	require.NoError(t, g.Do(ctx, "ledger:42", b.Token(), insert(data, "ledger:42", b.Token(), "B")))

	// A wakes up and writes as if it still held the lock.
	err = g.Do(ctx, "ledger:42", a.Token(), insert(data, "ledger:42", a.Token(), "A"))
	var stale *fenced.StaleTokenError
	require.ErrorAs(t, err, &stale)
	assert.Equal(t, b.Token(), stale.Highest)
	require.NoError(t, b.Release(ctx))
	assert.ErrorIs(t, a.Release(ctx), mutex.ErrNotHeld)

	assert.Equal(t, []string{"B"}, tags(t, pool, data))
}

func TestFnErrorAndPanicRollBack(t *testing.T) {
	pool, g, fences, data := setup(t)
	ctx := context.Background()
	boom := errors.New("boom")

	err := g.Do(ctx, "r", 7, func(ctx context.Context, tx pgx.Tx) error {
		if err := insert(data, "r", 7, "failed")(ctx, tx); err != nil {
			return err
		}
		return boom
	})
	require.Equal(t, boom, err, "fn's error comes back as it is")

	assert.PanicsWithValue(t, "kaboom", func() {
		_ = g.Do(ctx, "r", 8, func(ctx context.Context, tx pgx.Tx) error {
			_ = insert(data, "r", 8, "panicked")(ctx, tx)
			panic("kaboom")
		})
	})

	assert.Empty(t, tags(t, pool, data), "nothing of a failed fn is committed")
	var n int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM `+pgx.Identifier{fences}.Sanitize()).Scan(&n))
	assert.Zero(t, n, "the token of a rolled-back Do is not recorded")
	// So a lower token than the failed ones is still accepted.
	require.NoError(t, g.Do(ctx, "r", 6, insert(data, "r", 6, "ok")))
	// And the pool's connections are all back and usable after the panic.
	require.NoError(t, pool.Ping(ctx))
	assert.Equal(t, []string{"ok"}, tags(t, pool, data))
}

// TestConcurrentWritersCommitInTokenOrder: 32 goroutines, random tokens, 4
// resources. Each fn also bumps a per-resource counter row; that row's lock
// orders commits independently of the fence, so ordering rows by it gives
// the commit order, in which accepted tokens must never decrease.
func TestConcurrentWritersCommitInTokenOrder(t *testing.T) {
	t.Run("guard", func(t *testing.T) { concurrentWriters(t, false) })
	// The same with both tables protected: the trigger refuses no guarded
	// write, and adds no deadlock or reordering.
	t.Run("protected", func(t *testing.T) { concurrentWriters(t, true) })
}

func concurrentWriters(t *testing.T, protect bool) {
	pool, g, _, data := setup(t)
	ctx := context.Background()
	counters := data + "_seq"
	_, err := pool.Exec(ctx, `CREATE TABLE `+counters+` (resource text PRIMARY KEY, n bigint NOT NULL)`)
	require.NoError(t, err)
	resources := []string{"a", "b", "c", "d"}
	for _, r := range resources {
		_, err := pool.Exec(ctx, `INSERT INTO `+counters+` VALUES ($1, 0)`, r)
		require.NoError(t, err)
	}
	if protect {
		require.NoError(t, g.Protect(ctx, counters, "resource"))
		require.NoError(t, g.Protect(ctx, data, "resource"))
		_, err := pool.Exec(ctx, `UPDATE `+counters+` SET n = n`)
		require.Equal(t, fenced.CodeNoToken, code(err), "the tables are not protected")
	}

	const goroutines, perG = 32, 20
	var (
		mu       sync.Mutex
		rejected = map[string]bool{}
		accepted int
		wg       sync.WaitGroup
	)
	for w := range goroutines {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), 7))
			for i := range perG {
				res := resources[rng.IntN(len(resources))]
				tok := rng.Int64N(200)
				tag := fmt.Sprintf("%d/%d", w, i)
				err := g.Do(ctx, res, tok, func(ctx context.Context, tx pgx.Tx) error {
					var seq int64
					if err := tx.QueryRow(ctx, `UPDATE `+counters+` SET n = n + 1 WHERE resource = $1 RETURNING n`, res).Scan(&seq); err != nil {
						return err
					}
					_, err := tx.Exec(ctx, `INSERT INTO `+data+` (resource, token, tag, seq) VALUES ($1, $2, $3, $4)`, res, tok, tag, seq)
					return err
				})
				mu.Lock()
				var stale *fenced.StaleTokenError
				switch {
				case err == nil:
					accepted++
				case errors.As(err, &stale):
					assert.Greater(t, stale.Highest, stale.Token, "a rejection names a higher token")
					rejected[tag] = true
				default:
					t.Errorf("Do(%s, %d): unexpected error %v", res, tok, err)
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()

	rows, err := pool.Query(ctx, `SELECT resource, token, tag FROM `+data+` ORDER BY resource, seq`)
	require.NoError(t, err)
	last := map[string]int64{}
	n := 0
	for rows.Next() {
		var res, tag string
		var tok int64
		require.NoError(t, rows.Scan(&res, &tok, &tag))
		n++
		if prev, ok := last[res]; ok {
			assert.GreaterOrEqual(t, tok, prev, "resource %s: token %d committed after %d", res, tok, prev)
		}
		last[res] = tok
		assert.False(t, rejected[tag], "rejected call %s left a row", tag)
	}
	require.NoError(t, rows.Err())
	assert.Equal(t, accepted, n, "every accepted call left exactly its row")
	assert.Equal(t, goroutines*perG, accepted+len(rejected))
	assert.NotEmpty(t, rejected, "random tokens must produce some stale writes")
	t.Logf("%d accepted, %d rejected", accepted, len(rejected))
}

// TestFirstWriteRace: 16 goroutines race on a resource with no fence row. The
// insert conflict must not surface as an error, the highest token must win,
// and the accepted tokens must not decrease in commit order.
func TestFirstWriteRace(t *testing.T) {
	for round := range 5 {
		t.Run(fmt.Sprint(round), func(t *testing.T) {
			pool, g, fences, data := setup(t)
			ctx := context.Background()
			const n = 16
			start := make(chan struct{})
			errs := make([]error, n)
			tokens := rand.Perm(n)
			var wg sync.WaitGroup
			for i := range n {
				wg.Go(func() {
					<-start
					tok := int64(tokens[i]) / 2 // pairs of equal tokens
					errs[i] = g.Do(ctx, "fresh", tok, insert(data, "fresh", tok, fmt.Sprint(i)))
				})
			}
			close(start)
			wg.Wait()

			var max int64
			for i, err := range errs {
				tok := int64(tokens[i]) / 2
				if err != nil {
					require.ErrorIs(t, err, fenced.ErrStaleToken, "only stale rejections are allowed")
					continue
				}
				max = maxInt(max, tok)
			}
			assert.Equal(t, int64((n-1)/2), max, "the highest token is always accepted")

			var fence int64
			require.NoError(t, pool.QueryRow(ctx, `SELECT token FROM `+fences+` WHERE resource = 'fresh'`).Scan(&fence))
			assert.Equal(t, max, fence)
			rows, err := pool.Query(ctx, `SELECT token FROM `+data+` ORDER BY id`)
			require.NoError(t, err)
			committed, err := pgx.CollectRows(rows, pgx.RowTo[int64])
			require.NoError(t, err)
			// id comes from a sequence taken after the fence, under its row
			// lock, so it follows commit order.
			assert.True(t, sort.SliceIsSorted(committed, func(a, b int) bool { return committed[a] < committed[b] }), "committed tokens %v", committed)
		})
	}
}

func maxInt(a, b int64) int64 {
	if a > b {
		return a
	}
	return b
}

// TestSavepointAndConn: a pgx.Tx (savepoint) and a *pgx.Conn are Beginners.
func TestSavepointAndConn(t *testing.T) {
	pool, _, fences, data := setup(t)
	ctx := context.Background()

	outer, err := pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = outer.Rollback(ctx) }()
	g := newGuard(t, outer, fenced.WithTable(fences))
	require.NoError(t, g.Do(ctx, "sp", 4, insert(data, "sp", 4, "in-savepoint")))
	require.ErrorIs(t, g.Do(ctx, "sp", 2, insert(data, "sp", 2, "stale")), fenced.ErrStaleToken)
	// The outer transaction is still usable after the stale savepoint.
	require.NoError(t, outer.Commit(ctx))

	conn, err := pgx.Connect(ctx, testutil.PostgresURL(t))
	require.NoError(t, err)
	defer func() { _ = conn.Close(ctx) }()
	gc := newGuard(t, conn, fenced.WithTable(fences))
	require.ErrorIs(t, gc.Do(ctx, "sp", 3, insert(data, "sp", 3, "stale")), fenced.ErrStaleToken)
	require.NoError(t, gc.Do(ctx, "sp", 9, insert(data, "sp", 9, "conn")))

	assert.Equal(t, []string{"in-savepoint", "conn"}, tags(t, pool, data))
}

// TestCheckInOwnTransaction: Check for callers that run the transaction.
func TestCheckInOwnTransaction(t *testing.T) {
	pool, g, _, data := setup(t)
	ctx := context.Background()
	err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if err := g.Check(ctx, tx, "own", 10); err != nil {
			return err
		}
		return insert(data, "own", 10, "ten")(ctx, tx)
	})
	require.NoError(t, err)
	err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if err := g.Check(ctx, tx, "own", 9); err != nil {
			return err
		}
		return insert(data, "own", 9, "nine")(ctx, tx)
	})
	var stale *fenced.StaleTokenError
	require.ErrorAs(t, err, &stale)
	assert.Equal(t, int64(10), stale.Highest)
	assert.Equal(t, []string{"ten"}, tags(t, pool, data))
}

// TestSerializationFailureReachesCaller: under REPEATABLE READ, a writer that
// waited on the fence row of a concurrent writer gets SQLSTATE 40001 back,
// unchanged, so it can retry.
func TestSerializationFailureReachesCaller(t *testing.T) {
	pool, _, fences, data := setup(t)
	ctx := context.Background()
	cfg, err := pgxpool.ParseConfig(testutil.PostgresURL(t))
	require.NoError(t, err)
	cfg.ConnConfig.RuntimeParams["default_transaction_isolation"] = "repeatable read"
	rr, err := pgxpool.NewWithConfig(ctx, cfg)
	require.NoError(t, err)
	defer rr.Close()
	g := newGuard(t, rr, fenced.WithTable(fences))
	require.NoError(t, g.Do(ctx, "rr", 1, insert(data, "rr", 1, "seed")))

	inFirst := make(chan struct{})
	release := make(chan struct{})
	firstErr := make(chan error, 1)
	go func() {
		firstErr <- g.Do(ctx, "rr", 2, func(ctx context.Context, tx pgx.Tx) error {
			close(inFirst)
			<-release
			return insert(data, "rr", 2, "first")(ctx, tx)
		})
	}()
	<-inFirst
	secondErr := make(chan error, 1)
	go func() { secondErr <- g.Do(ctx, "rr", 3, insert(data, "rr", 3, "second")) }()
	// Wait until the second writer blocks on the fence row, then let the first commit.
	require.Eventually(t, func() bool {
		var waiting int
		_ = pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND datname = current_database()`).Scan(&waiting)
		return waiting > 0
	}, 10*time.Second, 5*time.Millisecond)
	close(release)
	require.NoError(t, <-firstErr)
	err = <-secondErr
	var pgErr *pgconn.PgError
	require.ErrorAs(t, err, &pgErr)
	assert.Equal(t, "40001", pgErr.Code)
	assert.NotErrorIs(t, err, fenced.ErrStaleToken)
	assert.Equal(t, []string{"seed", "first"}, tags(t, pool, data))
}

func TestMigrate(t *testing.T) {
	pool := testutil.Postgres(t)
	ctx := context.Background()
	_, err := pool.Exec(ctx, `CREATE SCHEMA IF NOT EXISTS "Odd Schema"`)
	require.NoError(t, err)
	g := newGuard(t, pool, fenced.WithTable(`Odd Schema.we"ird`))
	var wg sync.WaitGroup
	errs := make([]error, 4)
	for i := range errs {
		wg.Go(func() { errs[i] = g.Migrate(ctx) })
	}
	wg.Wait()
	for _, err := range errs {
		require.NoError(t, err, "concurrent Migrate")
	}
	require.NoError(t, g.Migrate(ctx), "Migrate again")
	require.NoError(t, g.Do(ctx, "x", 1, func(context.Context, pgx.Tx) error { return nil }))

	_, err = pool.Exec(ctx, `INSERT INTO "Odd Schema"."we""ird" (resource, token) VALUES ('neg', -1)`)
	var pgErr *pgconn.PgError
	require.ErrorAs(t, err, &pgErr)
	assert.Equal(t, "23514", pgErr.Code, "CHECK (token >= 0)")
}
