package chaos_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/redfence/redfence/fenced/sqlfence"
	"github.com/redfence/redfence/internal/chaoskit"
	"github.com/redfence/redfence/internal/redistest"
	"github.com/redfence/redfence/internal/testutil"
	"github.com/redfence/redfence/redis/redisfence"
)

// TestChaosStoresMultiKey runs the multi-key workload with the ledger in
// each other store fenced supports (MySQL/MariaDB and SQLite through
// sqlfence.Guard.DoAll, Redis through redisfence.Fence.DoAll), under the
// single-node setup's faults, with the multi-key checks.
func TestChaosStoresMultiKey(t *testing.T) {
	for _, store := range []struct {
		name   string
		ledger func(t *testing.T) chaoskit.Ledger
	}{
		{"mysql", func(t *testing.T) chaoskit.Ledger {
			return newSQLLedger(t, testutil.MySQL(t), sqlfence.MySQL, "mysql")
		}},
		{"sqlite", func(t *testing.T) chaoskit.Ledger {
			db, err := sql.Open("sqlite", testutil.SQLiteDSN(t))
			require.NoError(t, err)
			t.Cleanup(func() { _ = db.Close() })
			return newSQLLedger(t, db, sqlfence.SQLite, "sqlite")
		}},
		{"redis", newRedisLedger},
	} {
		t.Run(store.name, func(t *testing.T) {
			w := chaoskit.NewTransfers(t, store.ledger(t), chaoskit.Config{Long: *duration})
			singleNode(t, w)
			w.Run(6 * time.Second)
			w.Check("multikey-store-" + store.name)
		})
	}
}

// sqlLedger is Accounts rows of a table under sqlfence, a transfer one
// sqlfence.Guard.DoAll on both accounts.
type sqlLedger struct {
	db      *sql.DB
	guard   *sqlfence.Guard
	table   string
	dialect sqlfence.Dialect
}

func newSQLLedger(t *testing.T, db *sql.DB, d sqlfence.Dialect, name string) *sqlLedger {
	ctx := context.Background()
	table := "ledger_" + name
	seq := "seq BIGINT AUTO_INCREMENT PRIMARY KEY"
	if d == sqlfence.SQLite {
		seq = "seq INTEGER PRIMARY KEY AUTOINCREMENT"
	}
	var qs []string
	if d != sqlfence.SQLite { // SQLite: a fresh file each time
		// The package database outlives a run (go test -count).
		qs = append(qs, `DROP TABLE IF EXISTS `+table+`, `+table+`_accepted, fences_multi_`+name)
	}
	rows := make([]string, chaoskit.Accounts)
	for a := range rows {
		rows[a] = fmt.Sprintf("(%d, %d)", a, chaoskit.InitialBalance)
	}
	qs = append(qs,
		`CREATE TABLE `+table+` (id INT PRIMARY KEY, balance BIGINT NOT NULL)`,
		`INSERT INTO `+table+` VALUES `+strings.Join(rows, ", "),
		`CREATE TABLE `+table+`_accepted (`+seq+`, account INT NOT NULL, token BIGINT NOT NULL)`)
	for _, q := range qs {
		_, err := db.ExecContext(ctx, q)
		require.NoError(t, err, q)
	}
	g, err := sqlfence.New(db, d, sqlfence.WithTable("fences_multi_"+name))
	require.NoError(t, err)
	require.NoError(t, g.Migrate(ctx))
	return &sqlLedger{db: db, guard: g, table: table, dialect: d}
}

// Transfer reads and writes account by account in id order, as the
// PostgreSQL ledger does.
func (lg *sqlLedger) Transfer(ctx context.Context, from, to int, amount, fromToken, toToken int64) (read [2]int64, err error) {
	forUpdate := " FOR UPDATE"
	if lg.dialect == sqlfence.SQLite {
		forUpdate = "" // the fence's write lock already covers the database
	}
	accts, deltas, tokens := [2]int{from, to}, [2]int64{-amount, amount}, [2]int64{fromToken, toToken}
	order := []int{0, 1}
	if to < from {
		order = []int{1, 0}
	}
	claims := []sqlfence.Claim{{Resource: chaoskit.AccountKey(from), Token: fromToken}, {Resource: chaoskit.AccountKey(to), Token: toToken}}
	err = lg.guard.DoAll(ctx, claims, func(ctx context.Context, tx *sql.Tx) error {
		for _, i := range order {
			if err := tx.QueryRowContext(ctx, `SELECT balance FROM `+lg.table+` WHERE id = ?`+forUpdate, accts[i]).Scan(&read[i]); err != nil {
				return err
			}
			if _, err := tx.ExecContext(ctx, `UPDATE `+lg.table+` SET balance = ? WHERE id = ?`, read[i]+deltas[i], accts[i]); err != nil {
				return err
			}
			if _, err := tx.ExecContext(ctx, `INSERT INTO `+lg.table+`_accepted (account, token) VALUES (?, ?)`, accts[i], tokens[i]); err != nil {
				return err
			}
		}
		return nil
	})
	return read, err
}

func (lg *sqlLedger) Accepted(ctx context.Context) (out [chaoskit.Accounts][]int64, err error) {
	rows, err := lg.db.QueryContext(ctx, `SELECT account, token FROM `+lg.table+`_accepted ORDER BY seq`)
	if err != nil {
		return out, err
	}
	defer rows.Close()
	for rows.Next() {
		var a int
		var tok int64
		if err := rows.Scan(&a, &tok); err != nil {
			return out, err
		}
		out[a] = append(out[a], tok)
	}
	return out, rows.Err()
}

func (lg *sqlLedger) Balances(ctx context.Context) (out [chaoskit.Accounts]int64, err error) {
	rows, err := lg.db.QueryContext(ctx, `SELECT id, balance FROM `+lg.table)
	if err != nil {
		return out, err
	}
	defer rows.Close()
	for rows.Next() {
		var a int
		var b int64
		if err := rows.Scan(&a, &b); err != nil {
			return out, err
		}
		out[a] = b
	}
	return out, rows.Err()
}

// redisLedger is a balance key and an accepted-token list per account,
// each in its account's slot (redisfence.Tag), a transfer one
// redisfence.Fence.DoAll on both accounts (a server of its own, apart from
// the lock's).
type redisLedger struct {
	c     *redis.Client
	fence *redisfence.Fence
}

func newRedisLedger(t *testing.T) chaoskit.Ledger {
	c, _ := redistest.Redis(t)
	fence, err := redisfence.New(c)
	require.NoError(t, err)
	lg := &redisLedger{c: c, fence: fence}
	for a := range chaoskit.Accounts {
		require.NoError(t, c.Set(context.Background(), lg.balance(a), chaoskit.InitialBalance, 0).Err())
	}
	return lg
}

func (lg *redisLedger) balance(a int) string {
	return "balance:" + redisfence.Tag(chaoskit.AccountKey(a))
}

func (lg *redisLedger) accepted(a int) string {
	return "accepted:" + redisfence.Tag(chaoskit.AccountKey(a))
}

func (lg *redisLedger) Transfer(ctx context.Context, from, to int, amount, fromToken, toToken int64) (read [2]int64, err error) {
	claims := []redisfence.Claim{{Resource: chaoskit.AccountKey(from), Token: fromToken}, {Resource: chaoskit.AccountKey(to), Token: toToken}}
	keys := []string{lg.balance(from), lg.balance(to)}
	err = lg.fence.DoAll(ctx, claims, keys, func(ctx context.Context, tx *redis.Tx, pipe redis.Pipeliner) error {
		for i, k := range keys {
			v, err := tx.Get(ctx, k).Int64()
			if err != nil {
				return err
			}
			read[i] = v
		}
		pipe.Set(ctx, keys[0], read[0]-amount, 0)
		pipe.Set(ctx, keys[1], read[1]+amount, 0)
		pipe.RPush(ctx, lg.accepted(from), fromToken)
		pipe.RPush(ctx, lg.accepted(to), toToken)
		return nil
	})
	return read, err
}

func (lg *redisLedger) Accepted(ctx context.Context) (out [chaoskit.Accounts][]int64, err error) {
	for a := range out {
		vals, err := lg.c.LRange(ctx, lg.accepted(a), 0, -1).Result()
		if err != nil {
			return out, err
		}
		for _, v := range vals {
			tok, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				return out, err
			}
			out[a] = append(out[a], tok)
		}
	}
	return out, nil
}

func (lg *redisLedger) Balances(ctx context.Context) (out [chaoskit.Accounts]int64, err error) {
	for a := range out {
		v, err := lg.c.Get(ctx, lg.balance(a)).Int64()
		if err != nil && !errors.Is(err, redis.Nil) {
			return out, err
		}
		out[a] = v
	}
	return out, nil
}
