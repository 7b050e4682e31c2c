package chaos_test

import (
	"context"
	"database/sql"
	"errors"
	"strconv"
	"testing"
	"time"

	_ "github.com/go-sql-driver/mysql"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
	_ "modernc.org/sqlite"

	"github.com/redfence/redfence/fenced/sqlfence"
	"github.com/redfence/redfence/internal/chaoskit"
	"github.com/redfence/redfence/internal/redistest"
	"github.com/redfence/redfence/internal/testutil"
	"github.com/redfence/redfence/redis/redisfence"
)

// TestChaosStores runs the single-node setup's faults with the register in
// each other store fenced supports: MySQL/MariaDB and SQLite through
// sqlfence, and Redis (a server of its own, apart from the lock's) through
// redisfence. The checks are the same: a linearizable register, tokens
// accepted in increasing order.
func TestChaosStores(t *testing.T) {
	for _, store := range []struct {
		name string
		reg  func(t *testing.T) chaoskit.Register
	}{
		{"mysql", func(t *testing.T) chaoskit.Register {
			return newSQLRegister(t, testutil.MySQL(t), sqlfence.MySQL, "mysql")
		}},
		{"sqlite", func(t *testing.T) chaoskit.Register {
			db, err := sql.Open("sqlite", testutil.SQLiteDSN(t))
			require.NoError(t, err)
			t.Cleanup(func() { _ = db.Close() })
			return newSQLRegister(t, db, sqlfence.SQLite, "sqlite")
		}},
		{"redis", newRedisRegister},
	} {
		t.Run(store.name, func(t *testing.T) {
			w := newWorldOn(t, store.reg(t))
			singleNode(t, w)
			w.Run(8 * time.Second)
			w.Check("store-" + store.name)
		})
	}
}

// sqlRegister is a row of a table under sqlfence.
type sqlRegister struct {
	db      *sql.DB
	guard   *sqlfence.Guard
	table   string
	dialect sqlfence.Dialect
}

func newSQLRegister(t *testing.T, db *sql.DB, d sqlfence.Dialect, name string) *sqlRegister {
	ctx := context.Background()
	table := "register_" + name
	seq := "seq BIGINT AUTO_INCREMENT PRIMARY KEY"
	if d == sqlfence.SQLite {
		seq = "seq INTEGER PRIMARY KEY AUTOINCREMENT"
	}
	var qs []string
	if d != sqlfence.SQLite { // SQLite: a fresh file each time
		// The package database outlives a run (go test -count).
		qs = append(qs, `DROP TABLE IF EXISTS `+table+`, `+table+`_accepted, fences_`+name)
	}
	qs = append(qs,
		`CREATE TABLE `+table+` (id INT PRIMARY KEY, v BIGINT NOT NULL)`,
		`INSERT INTO `+table+` VALUES (1, 0)`,
		`CREATE TABLE `+table+`_accepted (`+seq+`, token BIGINT NOT NULL)`)
	for _, q := range qs {
		_, err := db.ExecContext(ctx, q)
		require.NoError(t, err, q)
	}
	g, err := sqlfence.New(db, d, sqlfence.WithTable("fences_"+name))
	require.NoError(t, err)
	require.NoError(t, g.Migrate(ctx))
	return &sqlRegister{db: db, guard: g, table: table, dialect: d}
}

func (r *sqlRegister) RMW(ctx context.Context, token int64) (read int64, err error) {
	forUpdate := " FOR UPDATE"
	if r.dialect == sqlfence.SQLite {
		forUpdate = "" // the fence's write lock already covers the database
	}
	err = r.guard.Do(ctx, "register", token, func(ctx context.Context, tx *sql.Tx) error {
		if err := tx.QueryRowContext(ctx, `SELECT v FROM `+r.table+` WHERE id = 1`+forUpdate).Scan(&read); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `UPDATE `+r.table+` SET v = v + 1 WHERE id = 1`); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, `INSERT INTO `+r.table+`_accepted (token) VALUES (?)`, token)
		return err
	})
	return read, err
}

func (r *sqlRegister) Accepted(ctx context.Context) ([]int64, error) {
	rows, err := r.db.QueryContext(ctx, `SELECT token FROM `+r.table+`_accepted ORDER BY seq`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []int64
	for rows.Next() {
		var tok int64
		if err := rows.Scan(&tok); err != nil {
			return nil, err
		}
		out = append(out, tok)
	}
	return out, rows.Err()
}

func (r *sqlRegister) Value(ctx context.Context) (v int64, err error) {
	err = r.db.QueryRowContext(ctx, `SELECT v FROM `+r.table+` WHERE id = 1`).Scan(&v)
	return v, err
}

// redisRegister is a counter key under redisfence, with the accepted tokens
// in a list appended in the same MULTI.
type redisRegister struct {
	c     *redis.Client
	fence *redisfence.Fence
	v, ok string
}

func newRedisRegister(t *testing.T) chaoskit.Register {
	c, _ := redistest.Redis(t)
	tag := redisfence.Tag("register")
	fence, err := redisfence.New(c)
	require.NoError(t, err)
	return &redisRegister{c: c, fence: fence, v: "register:" + tag, ok: "accepted:" + tag}
}

func (r *redisRegister) RMW(ctx context.Context, token int64) (read int64, err error) {
	err = r.fence.Do(ctx, "register", token, []string{r.v}, func(ctx context.Context, tx *redis.Tx, pipe redis.Pipeliner) error {
		read = 0
		v, err := tx.Get(ctx, r.v).Int64()
		if err != nil && !errors.Is(err, redis.Nil) {
			return err
		}
		read = v
		pipe.Set(ctx, r.v, v+1, 0)
		pipe.RPush(ctx, r.ok, token)
		return nil
	})
	return read, err
}

func (r *redisRegister) Accepted(ctx context.Context) ([]int64, error) {
	vals, err := r.c.LRange(ctx, r.ok, 0, -1).Result()
	if err != nil {
		return nil, err
	}
	out := make([]int64, len(vals))
	for i, v := range vals {
		if out[i], err = strconv.ParseInt(v, 10, 64); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func (r *redisRegister) Value(ctx context.Context) (int64, error) {
	v, err := r.c.Get(ctx, r.v).Int64()
	if errors.Is(err, redis.Nil) {
		return 0, nil
	}
	return v, err
}
