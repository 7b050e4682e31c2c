package sqlfence_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	_ "modernc.org/sqlite" // the driver: sql.Open("sqlite", …)

	"github.com/redfence/redfence/fenced/sqlfence"
)

// A guarded write to SQLite: a file database with a busy timeout, so that
// concurrent writers wait for the write lock rather than fail.
func Example() {
	dir, err := os.MkdirTemp("", "sqlfence-example-")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	db, err := sql.Open("sqlite", "file:"+filepath.Join(dir, "app.db")+"?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)")
	if err != nil {
		panic(err)
	}
	defer db.Close()
	ctx := context.Background()
	if _, err := db.ExecContext(ctx, `CREATE TABLE balances (account TEXT PRIMARY KEY, amount INTEGER NOT NULL)`); err != nil {
		panic(err)
	}

	g, err := sqlfence.New(db, sqlfence.SQLite)
	if err != nil {
		panic(err)
	}
	if err := g.Migrate(ctx); err != nil {
		panic(err)
	}
	write := func(token, amount int64) error {
		return g.Do(ctx, "account:42", token, func(ctx context.Context, tx *sql.Tx) error {
			_, err := tx.ExecContext(ctx, `INSERT INTO balances VALUES ('42', ?) ON CONFLICT (account) DO UPDATE SET amount = excluded.amount`, amount)
			return err
		})
	}

	fmt.Println(write(7, 100)) // the holder of token 7
	fmt.Println(write(8, 250)) // a later holder
	err = write(7, 90)         // the first holder, back from a pause
	var stale *sqlfence.StaleTokenError
	fmt.Println(errors.As(err, &stale), stale.Highest)

	var amount int64
	if err := db.QueryRowContext(ctx, `SELECT amount FROM balances WHERE account = '42'`).Scan(&amount); err != nil {
		panic(err)
	}
	fmt.Println(amount)
	// Output:
	// <nil>
	// <nil>
	// true 8
	// 250
}
