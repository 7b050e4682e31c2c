package pgdriver_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redfence/redfence/mutex"
	"github.com/redfence/redfence/pgdriver"
)

// TestLockTxExcludes: transfers between four accounts, each a read and
// then a write of both balances under LockTx of both (given in a random
// order), from goroutines over Drivers of their own. Without the row lock
// READ COMMITTED would lose updates; with it the money is conserved, and
// each key's tokens strictly increase in the order the transfers commit.
func TestLockTxExcludes(t *testing.T) {
	pool, schema := setup(t)
	ctx := t.Context()
	table := pgx.Identifier{schema, "accounts"}.Sanitize()
	_, err := pool.Exec(ctx, `CREATE TABLE `+table+` (id text PRIMARY KEY, balance bigint NOT NULL)`)
	require.NoError(t, err)
	accounts := []string{"a", "b", "c", "d"}
	for _, a := range accounts {
		_, err := pool.Exec(ctx, `INSERT INTO `+table+` VALUES ($1, 1000)`, a)
		require.NoError(t, err)
	}
	var mu sync.Mutex
	last := map[string]int64{}
	backwards := 0
	var wg sync.WaitGroup
	for w := range 6 {
		_, d, wpool := locker(t, schema, fmt.Sprint("transfer-", w))
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(w), 7))
			for range 40 {
				p := r.Perm(len(accounts))
				from, to := accounts[p[0]], accounts[p[1]]
				err := pgx.BeginFunc(ctx, wpool, func(tx pgx.Tx) error {
					tokens, err := d.LockTx(ctx, tx, from, to)
					if err != nil {
						return err
					}
					var fb, tb int64
					if err := tx.QueryRow(ctx, `SELECT balance FROM `+table+` WHERE id = $1`, from).Scan(&fb); err != nil {
						return err
					}
					if err := tx.QueryRow(ctx, `SELECT balance FROM `+table+` WHERE id = $1`, to).Scan(&tb); err != nil {
						return err
					}
					if _, err := tx.Exec(ctx, `UPDATE `+table+` SET balance = $2 WHERE id = $1`, from, fb-7); err != nil {
						return err
					}
					if _, err := tx.Exec(ctx, `UPDATE `+table+` SET balance = $2 WHERE id = $1`, to, tb+7); err != nil {
						return err
					}
					// Still under the row locks: the next holder of either
					// key commits after this one, with a larger token.
					mu.Lock()
					for i, k := range []string{from, to} {
						if tokens[i] <= last[k] {
							backwards++
						}
						last[k] = tokens[i]
					}
					mu.Unlock()
					return nil
				})
				if !assert.NoError(t, err) {
					return
				}
			}
		})
	}
	wg.Wait()
	var sum int64
	require.NoError(t, pool.QueryRow(ctx, `SELECT sum(balance) FROM `+table).Scan(&sum))
	assert.Equal(t, int64(4000), sum, "money is conserved")
	assert.Zero(t, backwards, "a key's token did not grow in commit order")
}

// TestLockTxAndTheLocker: a Locker's acquisition of a key that an open
// LockTx transaction holds waits for it, and gets a larger token after the
// commit; LockTx refuses a key a live lease holds (ErrNotAcquired), and
// the lease holder's Check still passes; released, the key is LockTx's
// with a larger token again.
func TestLockTxAndTheLocker(t *testing.T) {
	pool, schema := setup(t)
	ctx := t.Context()
	_, d, dpool := locker(t, schema, "intx")
	l, dl, lpool := locker(t, schema, "leaser")

	tx, err := dpool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }()
	tokens, err := d.LockTx(ctx, tx, "k", "k")
	require.NoError(t, err)
	require.Len(t, tokens, 2)
	assert.Equal(t, tokens[0], tokens[1], "a key named twice is one lock")

	got := tryBlocked(t, pool, l, "k", "leaser")
	require.NoError(t, tx.Commit(ctx))
	lk := <-got
	require.NotNil(t, lk)
	assert.Greater(t, lk.Token(), tokens[0])

	err = pgx.BeginFunc(ctx, dpool, func(tx pgx.Tx) error {
		_, err := d.LockTx(ctx, tx, "other", "k")
		return err
	})
	require.ErrorIs(t, err, mutex.ErrNotAcquired)
	assert.ErrorContains(t, err, `held by a lease: 'k'`)
	require.NoError(t, pgx.BeginFunc(ctx, lpool, func(tx pgx.Tx) error { return dl.Check(ctx, tx, lk) }),
		"the refused LockTx took nothing from the lease")

	require.NoError(t, lk.Release(ctx))
	require.NoError(t, pgx.BeginFunc(ctx, dpool, func(tx pgx.Tx) error {
		again, err := d.LockTx(ctx, tx, "k")
		if err == nil {
			assert.Greater(t, again[0], lk.Token())
		}
		return err
	}))
}

// TestLockTxBadInput: each is ErrInvalid, before any statement.
func TestLockTxBadInput(t *testing.T) {
	_, schema := setup(t)
	_, d, dpool := locker(t, schema, "bad")
	ctx := t.Context()
	tx, err := dpool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }()
	var nilCtx context.Context // a nil ctx, spelt so that linters let it through
	many := make([]string, 65)
	for i := range many {
		many[i] = fmt.Sprint("k", i)
	}
	for name, call := range map[string]func() error{
		"nil ctx":   func() error { _, err := d.LockTx(nilCtx, tx, "k"); return err },
		"nil tx":    func() error { _, err := d.LockTx(ctx, nil, "k"); return err },
		"no keys":   func() error { _, err := d.LockTx(ctx, tx); return err },
		"65 keys":   func() error { _, err := d.LockTx(ctx, tx, many...); return err },
		"empty key": func() error { _, err := d.LockTx(ctx, tx, "a", ""); return err },
		"NUL":       func() error { _, err := d.LockTx(ctx, tx, "a\x00b"); return err },
		"too long":  func() error { _, err := d.LockTx(ctx, tx, string(make([]byte, 4097))); return err },
		"nil batch": func() error { _, err := d.QueueLockTx(nil, "k"); return err },
		"lock not first": func() error {
			var b pgx.Batch
			b.Queue(`SELECT 1`)
			_, err := d.QueueLockTx(&b, "k")
			return err
		},
		"batch, no keys": func() error { _, err := d.QueueLockTx(&pgx.Batch{}); return err },
		"nil results": func() error {
			lk, err := d.QueueLockTx(&pgx.Batch{}, "k")
			require.NoError(t, err)
			_, err = lk.Result(nil)
			return err
		},
	} {
		assert.ErrorIs(t, call(), pgdriver.ErrInvalid, name)
	}
	// The transaction is still usable: nothing reached the server.
	var one int
	require.NoError(t, tx.QueryRow(ctx, `SELECT 1`).Scan(&one))
}

// TestQueueLockTx: the lock queued first in a batch, sent in a
// transaction with the statements after it in one round trip: they run
// once it holds the keys (a Locker's acquisition waits for the
// transaction), and when a live lease holds one of them the lock's Result
// is ErrNotAcquired and nothing after it runs or commits, even when the
// caller commits anyway.
func TestQueueLockTx(t *testing.T) {
	pool, schema := setup(t)
	ctx := t.Context()
	table := pgx.Identifier{schema, "journal"}.Sanitize()
	_, err := pool.Exec(ctx, `CREATE TABLE `+table+` (entry text)`)
	require.NoError(t, err)
	_, d, dpool := locker(t, schema, "batcher")
	l, _, _ := locker(t, schema, "queue-leaser")
	send := func(tx pgx.Tx, entry string, keys ...string) ([]int64, error) {
		var b pgx.Batch
		lk, err := d.QueueLockTx(&b, keys...)
		require.NoError(t, err)
		b.Queue(`INSERT INTO `+table+` VALUES ($1)`, entry)
		br := tx.SendBatch(ctx, &b)
		defer func() { _ = br.Close() }()
		tokens, err := lk.Result(br)
		if err != nil {
			return nil, err
		}
		_, err = br.Exec()
		return tokens, err
	}

	tx, err := dpool.Begin(ctx)
	require.NoError(t, err)
	tokens, err := send(tx, "first", "a", "b")
	require.NoError(t, err)
	require.Len(t, tokens, 2)
	got := tryBlocked(t, pool, l, "b", "queue-leaser")
	require.NoError(t, tx.Commit(ctx))
	lk := <-got
	require.NotNil(t, lk)
	assert.Greater(t, lk.Token(), tokens[1])

	tx, err = dpool.Begin(ctx)
	require.NoError(t, err)
	_, err = send(tx, "second", "a", "b")
	require.ErrorIs(t, err, mutex.ErrNotAcquired)
	assert.Error(t, tx.Commit(ctx), "an aborted transaction does not commit")
	rows, err := pool.Query(ctx, `SELECT entry FROM `+table)
	require.NoError(t, err)
	entries, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	assert.Equal(t, []string{"first"}, entries)
	require.NoError(t, lk.Release(ctx))
}

// TestLockTxNamesTheHeldKey: the refusal names the held key as
// quote_literal writes it, quotes inside it and all, and nothing after it.
func TestLockTxNamesTheHeldKey(t *testing.T) {
	_, schema := setup(t)
	ctx := t.Context()
	_, d, dpool := locker(t, schema, "names")
	l, _, _ := locker(t, schema, "names-leaser")
	const key = `it's "k"`
	lk, err := l.Lock(ctx, key)
	require.NoError(t, err)
	defer func() { _ = lk.Release(ctx) }()
	err = pgx.BeginFunc(ctx, dpool, func(tx pgx.Tx) error {
		_, err := d.LockTx(ctx, tx, "free", key)
		return err
	})
	require.ErrorIs(t, err, mutex.ErrNotAcquired)
	assert.True(t, strings.HasSuffix(err.Error(), `held by a lease: 'it''s "k"'`), err.Error())
}
