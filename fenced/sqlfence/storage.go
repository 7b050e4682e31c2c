package sqlfence

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/redfence/redfence/internal/cause"
)

// storageRecheck is how long a MySQL Guard trusts the fence table's engine
// once it has read it: the read costs a query on information_schema, and
// an engine changes only by an ALTER TABLE.
const storageRecheck = 10 * time.Second

// storageCheck remembers when the fence table's storage was last found
// safe, so that Do and Check read it at a Guard's first call and then at
// most once per storageRecheck, not on every call.
type storageCheck struct {
	born     time.Time    // the Guard's, for a monotonic clock
	verified atomic.Int64 // since born, in ns, when last found safe; 0: never
}

// due reports whether this call should read the storage. Until it has been
// found safe, every call reads it; after that, one call per storageRecheck
// claims the read, and the others trust the last one meanwhile.
func (c *storageCheck) due() bool {
	last := c.verified.Load()
	if last == 0 {
		return true
	}
	now := c.now()
	return now-last >= int64(storageRecheck) && c.verified.CompareAndSwap(last, now)
}

func (c *storageCheck) now() int64 { return int64(time.Since(c.born)) + 1 } // never 0

// checkStorage reads, in tx, what the fence table is stored in, and
// returns an error matching ErrUnsafeStorage when it cannot fence. A table
// the read does not find (a name the server folds) passes: the fence's
// own statements will name it.
func (g *Guard) checkStorage(ctx context.Context, tx *sql.Tx) error {
	var storage string
	err := tx.QueryRowContext(ctx, g.st.storage, g.st.storageArgs...).Scan(&storage)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return nil
	case err != nil:
		return cause.Wrap(ctx, fmt.Errorf("sqlfence: read the fence table's storage: %w", err))
	}
	return g.dialect.safeStorage(g.table, storage)
}

// verifyStorage is checkStorage for Do and Check on MySQL, when due. A
// failed read or an unsafe table leaves the check due, so that every call
// reads again until the table is fixed.
func (g *Guard) verifyStorage(ctx context.Context, tx *sql.Tx) error {
	if g.dialect != MySQL || !g.storage.due() {
		return nil
	}
	if err := g.checkStorage(ctx, tx); err != nil {
		g.storage.verified.Store(0)
		return err
	}
	g.storage.verified.Store(g.storage.now())
	return nil
}
