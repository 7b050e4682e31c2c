package chaos_test

import (
	"testing"
	"time"

	"github.com/redfence/redfence/internal/chaoskit"
)

// TestChaosMultiKey runs the multi-key workload: clients transfer between
// two of a few accounts, each taking both accounts' keys with LockAll (in
// the transfer's direction, so in random order) and writing both balances
// in one transaction fenced on both (fenced.Guard.DoAll), under the faults
// of the single-node and Redlock setups.
func TestChaosMultiKey(t *testing.T) {
	for _, setup := range []struct {
		name    string
		lockers func(*testing.T, *chaoskit.World)
		bounded time.Duration
	}{
		{"single", singleNode, 12 * time.Second},
		{"redlock", redlock, 8 * time.Second},
	} {
		t.Run(setup.name, func(t *testing.T) {
			w := chaoskit.NewTransfers(t, chaoskit.PGLedger(t, "multi_"+setup.name), chaoskit.Config{Long: *duration})
			setup.lockers(t, w)
			w.Run(setup.bounded)
			w.Check("multikey-" + setup.name)
		})
	}
}
