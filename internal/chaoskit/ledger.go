package chaoskit

import (
	"context"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redfence/redfence/fenced"
	"github.com/redfence/redfence/internal/testutil"
)

// Accounts is how many accounts the transfer workload moves money between:
// few, so that transfers contend.
const Accounts = 4

// InitialBalance is every account's balance before a run.
const InitialBalance = 1000

// AccountKey is account a's lock key, and its resource in the fence.
func AccountKey(a int) string { return fmt.Sprintf("account:%d", a) }

// Ledger is the multi-key workload's fenced resource: Accounts balances in
// one store, each fenced under its own resource (AccountKey).
type Ledger interface {
	// Transfer moves amount from account from to account to in one atomic
	// step fenced on both accounts with their tokens, and appends each
	// token to its account's accepted list in that step. It reads both
	// balances and writes the values it computed, so that only the fence
	// serialises overlapping transfers. It returns the balances read,
	// from's then to's; an error matching fenced.ErrStaleToken means
	// nothing changed.
	Transfer(ctx context.Context, from, to int, amount, fromToken, toToken int64) (read [2]int64, err error)
	// Accepted are the tokens of the accepted writes of each account, in
	// commit order.
	Accepted(ctx context.Context) ([Accounts][]int64, error)
	// Balances are the accounts' balances, by account.
	Balances(ctx context.Context) ([Accounts]int64, error)
}

// pgLedger is Accounts rows of a PostgreSQL table, the table protected by
// fenced's trigger. A transfer is one transaction fenced on both its
// accounts (fenced.Guard.DoAll).
type pgLedger struct {
	pool  *pgxpool.Pool
	guard *fenced.Guard
	table string
}

// PGLedger is a ledger in the test package's PostgreSQL database
// (testutil.Postgres), in tables named after name, dropped at t's clean-up
// so that the test can run again in the same database (go test -count).
func PGLedger(t *testing.T, name string) Ledger {
	pool := testutil.Postgres(t)
	ctx := context.Background()
	table := "ledger_" + name
	_, err := pool.Exec(ctx, `CREATE TABLE `+table+` (id int PRIMARY KEY, balance bigint NOT NULL);
		INSERT INTO `+table+` SELECT a, `+fmt.Sprint(InitialBalance)+` FROM generate_series(0, `+fmt.Sprint(Accounts-1)+`) a;
		CREATE TABLE `+table+`_accepted (seq bigserial PRIMARY KEY, account int NOT NULL, token bigint NOT NULL)`)
	require.NoError(t, err)
	t.Cleanup(func() {
		_, err := pool.Exec(context.Background(), `DROP TABLE IF EXISTS `+table+`, `+table+`_accepted, fences_`+name)
		assert.NoError(t, err)
	})
	g, err := fenced.New(pool, fenced.WithTable("fences_"+name))
	require.NoError(t, err)
	require.NoError(t, g.Migrate(ctx))
	require.NoError(t, g.Protect(ctx, table, `'account:' || id`))
	return &pgLedger{pool: pool, guard: g, table: table}
}

// Transfer is Ledger's, in one transaction, without row locks of its own:
// a transfer that got past a broken lock or fence would lose an update.
func (lg *pgLedger) Transfer(ctx context.Context, from, to int, amount, fromToken, toToken int64) (read [2]int64, err error) {
	claims := []fenced.Claim{{Resource: AccountKey(from), Token: fromToken}, {Resource: AccountKey(to), Token: toToken}}
	err = lg.guard.DoAll(ctx, claims, func(ctx context.Context, tx pgx.Tx) error {
		return lg.move(ctx, tx, [2]int{from, to}, [2]int64{-amount, amount}, [2]int64{fromToken, toToken}, &read)
	})
	return read, err
}

// move is Transfer's read-modify-write in tx, account by account in id
// order so that even unfenced transfers do not deadlock in the database.
func (lg *pgLedger) move(ctx context.Context, tx pgx.Tx, accts [2]int, deltas, tokens [2]int64, read *[2]int64) error {
	order := []int{0, 1}
	if accts[1] < accts[0] {
		order = []int{1, 0}
	}
	for _, i := range order {
		if err := tx.QueryRow(ctx, `SELECT balance FROM `+lg.table+` WHERE id = $1`, accts[i]).Scan(&read[i]); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `UPDATE `+lg.table+` SET balance = $2 WHERE id = $1`, accts[i], read[i]+deltas[i]); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `INSERT INTO `+lg.table+`_accepted (account, token) VALUES ($1, $2)`, accts[i], tokens[i]); err != nil {
			return err
		}
	}
	return nil
}

func (lg *pgLedger) Accepted(ctx context.Context) ([Accounts][]int64, error) {
	var out [Accounts][]int64
	rows, err := lg.pool.Query(ctx, `SELECT account, token FROM `+lg.table+`_accepted ORDER BY seq`)
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

func (lg *pgLedger) Balances(ctx context.Context) ([Accounts]int64, error) {
	var out [Accounts]int64
	rows, err := lg.pool.Query(ctx, `SELECT id, balance FROM `+lg.table)
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
