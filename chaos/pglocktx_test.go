package chaos_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/redfence/redfence/fenced"
	"github.com/redfence/redfence/internal/chaoskit"
	"github.com/redfence/redfence/internal/localpg"
	"github.com/redfence/redfence/pgdriver"
)

// TestChaosPGLockInTx runs the register workload with the register in the
// lock's own PostgreSQL, under TestChaosPGLock's faults: two clients hold
// the key with their Locker and write in a transaction that Checks the
// hold first, two take it in the write's own transaction (LockTx, and
// QueueLockTx with the read), so that both kinds contend for one key. A
// write whose commit's reply was lost is settled by the register
// (committed or not) before the history is judged. The checks are the
// others': a linearizable register, tokens accepted in increasing order.
func TestChaosPGLockInTx(t *testing.T) {
	srv, admin := pgServer(t)
	reg := newTxRegister(t, srv, admin)
	w := newWorldOn(t, reg)
	w.TxClients = map[int]chaoskit.TxRMW{}
	pgLockOn(t, w, srv, admin, func(i int, pool *pgxpool.Pool, d *pgdriver.Driver) {
		if i >= 2 {
			w.TxClients[i] = reg.inTx(pool, d, i == 3)
		}
	})
	w.Run(20 * time.Second)
	w.Check("pglocktx")
}

// txRegister is chaoskit's register in pgdriver's own database: each write
// records its op, token and what it read in the same transaction.
type txRegister struct {
	url  string
	pool *pgxpool.Pool // the Locker clients' writes; kills, pauses and restarts reach it
	d    *pgdriver.Driver
}

const registerKey = "register"

func newTxRegister(t *testing.T, srv *localpg.Server, admin *pgxpool.Pool) *txRegister {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := admin.Exec(ctx, `CREATE TABLE register (id int PRIMARY KEY, v bigint NOT NULL);
		INSERT INTO register VALUES (1, 0);
		CREATE TABLE register_accepted (seq bigserial PRIMARY KEY, op text UNIQUE NOT NULL, token bigint NOT NULL, read bigint NOT NULL)`)
	require.NoError(t, err)
	cfg, err := pgxpool.ParseConfig(srv.URL())
	require.NoError(t, err)
	cfg.ConnConfig.RuntimeParams["idle_in_transaction_session_timeout"] = "3s"
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	d, err := pgdriver.New(pool)
	require.NoError(t, err)
	// The lease row exists before any write, so that Outcome's row lock
	// always finds it (an uncommitted insert is invisible to it).
	require.NoError(t, pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		_, err := d.LockTx(ctx, tx, registerKey)
		return err
	}))
	return &txRegister{url: srv.URL(), pool: pool, d: d}
}

// RMW is a Locker client's write: Check, then the increment.
func (r *txRegister) RMW(ctx context.Context, token int64) (read int64, err error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	err = pgx.BeginFunc(ctx, r.pool, func(tx pgx.Tx) error {
		if err := r.d.Check(ctx, tx, held{registerKey, token}); err != nil {
			return err
		}
		read, err = increment(ctx, tx, chaoskit.LockOp(token), token)
		return err
	})
	if errors.Is(err, pgdriver.ErrNotHeld) {
		return 0, fmt.Errorf("%w: %w", fenced.ErrStaleToken, err)
	}
	return read, err
}

// inTx is a client's write under LockTx (queued with the read when batch).
func (r *txRegister) inTx(pool *pgxpool.Pool, d *pgdriver.Driver, batch bool) chaoskit.TxRMW {
	return func(ctx context.Context, op string, held func()) (read int64, err error) {
		err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			if !batch {
				tokens, err := d.LockTx(ctx, tx, registerKey)
				if err != nil {
					return err
				}
				held()
				read, err = increment(ctx, tx, op, tokens[0])
				return err
			}
			var b pgx.Batch
			lk, err := d.QueueLockTx(&b, registerKey)
			if err != nil {
				return err
			}
			b.Queue(`SELECT v FROM register WHERE id = 1`)
			br := tx.SendBatch(ctx, &b)
			tokens, err := lk.Result(br)
			if err == nil {
				held()
				err = br.QueryRow().Scan(&read)
			}
			if cerr := br.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				return err
			}
			return write(ctx, tx, op, tokens[0], read)
		})
		return read, err
	}
}

// increment reads the register and writes it plus one, as op under token.
func increment(ctx context.Context, tx pgx.Tx, op string, token int64) (read int64, err error) {
	if err := tx.QueryRow(ctx, `SELECT v FROM register WHERE id = 1`).Scan(&read); err != nil {
		return 0, err
	}
	return read, write(ctx, tx, op, token, read)
}

// write writes read plus one and records op.
func write(ctx context.Context, tx pgx.Tx, op string, token, read int64) error {
	if _, err := tx.Exec(ctx, `UPDATE register SET v = $1 WHERE id = 1`, read+1); err != nil {
		return err
	}
	_, err := tx.Exec(ctx, `INSERT INTO register_accepted (op, token, read) VALUES ($1, $2, $3)`, op, token, read)
	return err
}

// Outcome waits for the lease row's lock, which every write held from
// before its commit was sent until it ended, so that no transaction can
// still commit op; then it looks op up.
func (r *txRegister) Outcome(ctx context.Context, op string) (read int64, committed bool, err error) {
	err = r.with(ctx, func(c *pgx.Conn) error {
		return pgx.BeginFunc(ctx, c, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, `SELECT 1 FROM redfence_locks WHERE key = $1 FOR UPDATE`, registerKey); err != nil {
				return err
			}
			err := tx.QueryRow(ctx, `SELECT read FROM register_accepted WHERE op = $1`, op).Scan(&read)
			switch {
			case errors.Is(err, pgx.ErrNoRows):
				return nil
			case err != nil:
				return err
			}
			committed = true
			return nil
		})
	})
	return read, committed, err
}

func (r *txRegister) Accepted(ctx context.Context) (tokens []int64, err error) {
	err = r.with(ctx, func(c *pgx.Conn) error {
		rows, err := c.Query(ctx, `SELECT token FROM register_accepted ORDER BY seq`)
		if err != nil {
			return err
		}
		tokens, err = pgx.CollectRows(rows, pgx.RowTo[int64])
		return err
	})
	return tokens, err
}

func (r *txRegister) Value(ctx context.Context) (v int64, err error) {
	err = r.with(ctx, func(c *pgx.Conn) error {
		return c.QueryRow(ctx, `SELECT v FROM register WHERE id = 1`).Scan(&v)
	})
	return v, err
}

// with runs f on a connection of its own: the pools' may have died with a
// fault.
func (r *txRegister) with(ctx context.Context, f func(*pgx.Conn) error) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	c, err := pgx.Connect(ctx, r.url)
	if err != nil {
		return err
	}
	defer func() { _ = c.Close(context.WithoutCancel(ctx)) }()
	return f(c)
}

// held is a hold as pgdriver.Check takes it.
type held struct {
	key   string
	token int64
}

func (h held) Key() string  { return h.key }
func (h held) Token() int64 { return h.token }
