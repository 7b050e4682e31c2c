package sqlfence_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/redfence/redfence/fenced/sqlfence"
)

// TestMutationWithoutRowLock checks the concurrency test itself: with the
// fence's check made without the row lock (a plain SELECT of the highest
// token, then an unconditional write), PostgreSQL and MySQL writers commit
// out of token order, and TestConcurrentWritersCommitInTokenOrder's
// witness sees it.
//
// SQLite needs no row lock, and the same mutation shows why: one write lock
// for the whole database serialises writers. Taken at BEGIN
// (_txlock=immediate) it covers the SELECT too, so every commit stays in
// order; in a deferred transaction the SELECT runs first, and a writer whose
// read is no longer the latest cannot take the write lock at all
// (SQLITE_BUSY, SQLITE_BUSY_SNAPSHOT): it fails, never commits out of order.
func TestMutationWithoutRowLock(t *testing.T) {
	eachStore(t, func(t *testing.T, s store) {
		if s.dialect == sqlfence.SQLite {
			e := setup(t, s)
			e.g = sqlfence.WithoutRowLock(e.g)
			res := concurrentWriters(t, e)
			t.Logf("%d accepted, %d rejected, %d errors", res.accepted, res.rejected, len(res.errs))
			assert.Empty(t, res.outOfOrder, "SQLite's write lock keeps commits in order")
			for _, err := range res.errs {
				assert.Contains(t, err.Error(), "database is locked", "a deferred writer that read first may only fail to lock")
			}
			if s.name == "sqlite-immediate" {
				assert.Empty(t, res.errs)
			}
			return
		}
		// A race is likelier than not in one run; three runs make missing
		// it a rare event, and any one out-of-order commit is proof.
		for run := range 3 {
			e := setup(t, s)
			e.g = sqlfence.WithoutRowLock(e.g)
			res := concurrentWriters(t, e)
			t.Logf("run %d: %d accepted, %d rejected, %d errors, %d out of order, such as %s",
				run, res.accepted, res.rejected, len(res.errs), len(res.outOfOrder), strings.Join(first(res.outOfOrder, 3), "; "))
			assert.Empty(t, res.errs)
			if len(res.outOfOrder) > 0 {
				return
			}
		}
		assert.Fail(t, "the guard without its row lock never committed out of order: the concurrency test cannot see the fence fail")
	})
}

func first(s []string, n int) []string { return s[:min(n, len(s))] }
