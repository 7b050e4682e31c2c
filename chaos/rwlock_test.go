package chaos_test

import (
	"testing"
	"time"

	"github.com/redfence/redfence/internal/chaoskit"
)

// TestChaosRWLock runs the read-write lock workload over the
// single-node setup's faults: clients mostly read the PostgreSQL register
// under read holds, some write it through the fence with their write
// token, some downgrade after writing and read on. Redlock keeps no
// read-write locks, so it has no Redlock setup.
func TestChaosRWLock(t *testing.T) {
	w := chaoskit.NewRW(t, chaoskit.PGRegister(t, "rwlock"), chaoskit.Config{Long: *duration})
	singleNode(t, w.World)
	w.Run(8 * time.Second)
	w.Check("rwlock")
}
