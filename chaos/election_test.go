package chaos_test

import (
	"testing"
	"time"

	"github.com/redfence/redfence/internal/chaoskit"
)

// TestChaosElection runs the election workload: the clients
// campaign on one election (half with Campaign and Release, half with Run)
// and, as leader, make fenced read-modify-writes of a PostgreSQL register
// with their term, under the faults of the single-node and Redlock setups;
// a stalling leader is cut off from Redis (so its renewals fail, as a
// paused process's would) and writes with its old term after the lease.
// On Redlock, Observe falls back to polling; Campaign and Run do not
// depend on it.
func TestChaosElection(t *testing.T) {
	for _, setup := range []struct {
		name    string
		lockers func(*testing.T, *chaoskit.World)
		bounded time.Duration
	}{
		{"single", singleNode, 10 * time.Second},
		{"redlock", func(t *testing.T, w *chaoskit.World) { redlockVia(t, w, true) }, 8 * time.Second},
	} {
		t.Run(setup.name, func(t *testing.T) {
			w := chaoskit.NewElection(t, chaoskit.PGRegister(t, "election_"+setup.name), chaoskit.Config{Long: *duration})
			setup.lockers(t, w)
			w.Run(setup.bounded)
			w.Check("election-" + setup.name)
		})
	}
}
