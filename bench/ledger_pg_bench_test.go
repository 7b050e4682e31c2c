package bench

import (
	"context"
	"fmt"
	"time"

	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/redfence/redfence/internal/benchkit"
	"github.com/redfence/redfence/internal/testutil"
	"github.com/redfence/redfence/mutex"
	"github.com/redfence/redfence/pgdriver"
)

// BenchmarkLedgerPGPaired is BenchmarkLedgerPaired's transfer on
// PostgreSQL alone: per-account locks on pgdriver, taken in the transfer's
// own transaction (LockTx, alone or queued with the read: QueueLockTx, as
// examples/ledger -postgres does),
// or by the Locker (LockAll of both accounts)
// and checked first in the transfer's transaction (pgdriver.Check); then
// read both balances, write both back. It is paired with
// the same transfer with no lock at all (the accounts' rows locked FOR
// UPDATE in id order, the floor), and with the Redis lock and the
// PostgreSQL fence of BenchmarkLedgerPaired; each worker has its own pool
// and Locker, listening for releases (WithListener).
func BenchmarkLedgerPGPaired(b *testing.B) {
	ctx := context.Background()
	pool, guard, lockers, meter := ledgerSetup(ctx, b)
	url := testutil.PostgresURL(b)
	d0, err := pgdriver.New(pool)
	if err != nil {
		b.Fatal(err)
	}
	if err := d0.Migrate(ctx); err != nil {
		b.Fatal(err)
	}
	pools := make([]*pgxpool.Pool, ledgerWorkers)
	drivers := make([]*pgdriver.Driver, ledgerWorkers)
	pgLockers := make([]*mutex.Locker, ledgerWorkers)
	for i := range pools {
		pools[i], err = pgxpool.New(ctx, url)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(pools[i].Close)
		if drivers[i], err = pgdriver.New(pools[i], pgdriver.WithListener(url)); err != nil {
			b.Fatal(err)
		}
		if pgLockers[i], err = mutex.New(drivers[i]); err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = pgLockers[i].Close() })
	}
	pgLock := func(ctx context.Context, w, from, to int) (wait time.Duration, err error) {
		keys := []string{fmt.Sprint("account:", from), fmt.Sprint("account:", to)}
		t0 := time.Now()
		err = pgLockers[w].DoAll(ctx, keys, func(ctx context.Context, ls *mutex.Locks) error {
			wait = time.Since(t0)
			return pgx.BeginFunc(ctx, pools[w], func(tx pgx.Tx) error {
				for _, k := range ls.Keys() {
					if err := drivers[w].Check(ctx, tx, held{k, ls.TokenOf(k)}); err != nil {
						return err
					}
				}
				return moveOne(ctx, tx, from, to, "")
			})
		})
		return wait, err
	}
	// The same transfer with both keys taken in its own transaction
	// (LockTx): the lock, its check and the write are one commit.
	pgLockTx := func(ctx context.Context, w, from, to int) (wait time.Duration, err error) {
		err = pgx.BeginFunc(ctx, pools[w], func(tx pgx.Tx) error {
			t0 := time.Now()
			if _, err := drivers[w].LockTx(ctx, tx, fmt.Sprint("account:", from), fmt.Sprint("account:", to)); err != nil {
				return err
			}
			wait = time.Since(t0)
			return moveOne(ctx, tx, from, to, "")
		})
		return wait, err
	}
	// The same, the lock queued with the transfer's read (QueueLockTx):
	// both in one round trip, the keys held for one round trip less.
	pgLockTxBatch := func(ctx context.Context, w, from, to int) (wait time.Duration, err error) {
		err = pgx.BeginFunc(ctx, pools[w], func(tx pgx.Tx) error {
			var bt pgx.Batch
			lk, err := drivers[w].QueueLockTx(&bt, fmt.Sprint("account:", from), fmt.Sprint("account:", to))
			if err != nil {
				return err
			}
			bt.Queue(`SELECT id, balance FROM bench_ledger WHERE id IN ($1, $2)`, from, to)
			t0 := time.Now()
			br := tx.SendBatch(ctx, &bt)
			defer func() { _ = br.Close() }()
			if _, err := lk.Result(br); err != nil {
				return err
			}
			wait = time.Since(t0)
			rows, err := br.Query()
			if err != nil {
				return err
			}
			bal, err := balances(rows)
			if err != nil {
				return err
			}
			if err := br.Close(); err != nil {
				return err
			}
			return writeBack(ctx, tx, from, to, bal)
		})
		return wait, err
	}
	noLock := func(ctx context.Context, w, from, to int) (time.Duration, error) {
		return 0, pgx.BeginFunc(ctx, pools[w], func(tx pgx.Tx) error {
			return moveOne(ctx, tx, from, to, " ORDER BY id FOR UPDATE")
		})
	}
	// Each run of a pair, b.N's calibration runs and -count's included,
	// gets sides of its own: what a side measured adds up across its
	// blocks, and a run reports its own cycles.
	pair := func(name string, newSub, newRef func() *ledgerSide) {
		b.Run(fmt.Sprintf("w%d-a%d/%s", ledgerWorkers, ledgerAccounts, name), func(b *testing.B) {
			sub, ref := newSub(), newRef()
			cycles := benchkit.Alternate(b, ledgerWorkers*ledgerPerWorker,
				func() time.Duration { return sub.block(ctx, b) },
				func() time.Duration { return ref.block(ctx, b) })
			sub.report(b, cycles, "")
			ref.report(b, cycles, "ref-")
		})
	}
	side := func(xfer func(context.Context, int, int, int) (time.Duration, error)) func() *ledgerSide {
		return func() *ledgerSide {
			return &ledgerSide{pool: pool, guard: guard, lockers: lockers, meter: meter, xfer: xfer}
		}
	}
	redisFence := side(nil) // the Redis-locked, fenced transfer of BenchmarkLedgerPaired
	pair("pglocktx-vs-nolock", side(pgLockTx), side(noLock))
	pair("pglocktx-vs-redis-fence", side(pgLockTx), redisFence)
	pair("pglocktx-batch-vs-nolock", side(pgLockTxBatch), side(noLock))
	pair("pglocktx-batch-vs-redis-fence", side(pgLockTxBatch), redisFence)
	pair("pglock-vs-nolock", side(pgLock), side(noLock))
	pair("pglock-vs-redis-fence", side(pgLock), redisFence)
}

// moveOne reads both balances in tx (with lock, the rows' locking clause)
// and writes both back, one moved from from to to.
func moveOne(ctx context.Context, tx pgx.Tx, from, to int, lock string) error {
	rows, err := tx.Query(ctx, `SELECT id, balance FROM bench_ledger WHERE id IN ($1, $2)`+lock, from, to)
	if err != nil {
		return err
	}
	bal, err := balances(rows)
	if err != nil {
		return err
	}
	return writeBack(ctx, tx, from, to, bal)
}

// balances reads rows of id and balance.
func balances(rows pgx.Rows) (map[int]int64, error) {
	bal := map[int]int64{}
	var id int
	var v int64
	_, err := pgx.ForEachRow(rows, []any{&id, &v}, func() error {
		bal[id] = v
		return nil
	})
	return bal, err
}

// writeBack writes both balances, one moved from from to to.
func writeBack(ctx context.Context, tx pgx.Tx, from, to int, bal map[int]int64) error {
	_, err := tx.Exec(ctx, `UPDATE bench_ledger SET balance = CASE id WHEN $1 THEN $2::bigint ELSE $3::bigint END WHERE id IN ($1, $4)`,
		from, bal[from]-1, bal[to]+1, to)
	return err
}

// held is a hold's key and token, as Check takes them.
type held struct {
	key   string
	token int64
}

func (h held) Key() string  { return h.key }
func (h held) Token() int64 { return h.token }
