package bench

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/redfence/redfence/fenced"
	"github.com/redfence/redfence/mutex"
)

// BenchmarkLedgerParts splits BenchmarkLedgerPaired's per-account transfer
// into its two parts, each run by the same ledgerWorkers workers over
// ledgerAccounts accounts with nothing else: "write" is the PostgreSQL
// part (ledgerWrite) under no lock at all, its claims all one token (equal
// tokens are accepted, so concurrent writes never refuse each other) in a
// fence of its own, and
// "lock" is DoAll of the two accounts' keys around nothing. The write's
// tps is what any locking could at most reach on this host; its cpu-us
// and the lock's add up to the per-account transfer's. Metrics as
// BenchmarkLedgerPaired's.
func BenchmarkLedgerParts(b *testing.B) {
	ctx := context.Background()
	pool, _, lockers, meter := ledgerSetup(ctx, b)
	// A fence of its own: its token would refuse the paired benchmark's
	// Redis tokens in the same fence (go test -count).
	guard, err := fenced.New(pool, fenced.WithTable("bench_ledger_parts_fences"))
	if err != nil {
		b.Fatal(err)
	}
	if err := guard.Migrate(ctx); err != nil {
		b.Fatal(err)
	}
	const token = 1
	write := func(_ *mutex.Locker, from, to int) error {
		claims := []fenced.Claim{{Resource: fmt.Sprint("account:", from), Token: token}, {Resource: fmt.Sprint("account:", to), Token: token}}
		return ledgerWrite(ctx, pool, guard, from, to, claims)
	}
	lock := func(l *mutex.Locker, from, to int) error {
		keys := []string{fmt.Sprint("account:", from), fmt.Sprint("account:", to)}
		return l.DoAll(ctx, keys, func(context.Context, *mutex.Locks) error { return nil })
	}
	for _, part := range []struct {
		name string
		fn   func(l *mutex.Locker, from, to int) error
	}{{"write", write}, {"lock", lock}} {
		b.Run(fmt.Sprintf("w%d-a%d/%s", ledgerWorkers, ledgerAccounts, part.name), func(b *testing.B) {
			per := (b.N + ledgerWorkers - 1) / ledgerWorkers
			cpu0 := meter.read(b)
			start := time.Now()
			var wg sync.WaitGroup
			for w, l := range lockers {
				rng := rand.New(rand.NewPCG(uint64(w), 1))
				wg.Go(func() {
					for range per {
						from := rng.IntN(ledgerAccounts)
						to := (from + 1 + rng.IntN(ledgerAccounts-1)) % ledgerAccounts
						if err := part.fn(l, from, to); err != nil {
							b.Error(err)
							return
						}
					}
				})
			}
			wg.Wait()
			n := per * ledgerWorkers
			b.ReportMetric(float64(n)/time.Since(start).Seconds(), "tps")
			meter.read(b).sub(cpu0).report(b, n, "")
		})
	}
}
