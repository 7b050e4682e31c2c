package chaos_test

import (
	"testing"
	"time"

	"github.com/redfence/redfence/internal/chaoskit"
)

// TestChaosSemaphore runs the semaphore workload: the clients take permits
// of one semaphore of chaoskit.Permits (fewer than the clients), write to
// a PostgreSQL table while they hold one (each write checks, right before
// its commit, that the permit is still live) and release it, under the
// faults of the single-node and Sentinel setups. A semaphore's tokens
// order its grants but cannot fence a resource (an older permit may still
// be live beside a newer one), so the check is of the permits: a model of
// a counting semaphore over grants and ends, and the writes against them.
func TestChaosSemaphore(t *testing.T) {
	for _, setup := range []struct {
		name    string
		lockers func(*testing.T, *chaoskit.World)
		bounded time.Duration
	}{
		{"single", singleNode, 4 * time.Second},
		{"sentinel", func(t *testing.T, w *chaoskit.World) { sentinel(t, w, true) }, 3 * time.Second},
	} {
		t.Run(setup.name, func(t *testing.T) {
			w := chaoskit.NewSemaphore(t, setup.name, chaoskit.Config{Long: *duration})
			setup.lockers(t, w)
			w.Run(setup.bounded)
			w.Check("semaphore-" + setup.name)
		})
	}
}
