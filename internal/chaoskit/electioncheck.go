package chaoskit

import (
	"context"
	"fmt"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redfence/redfence/internal/leadercheck"
)

// checkElection is Check for the election workload: the register's history
// linearizable; the terms the resource accepted, in commit order, never
// going down (a leader writes several times with one term); the register
// counting exactly the accepted writes; terms strictly increasing in the
// order their leaders began; every write decided while its writer
// believed it led; and no two beliefs of leading overlapping beyond the
// drift margin, except across a fault that lost the lock in the store.
func (w *World) checkElection(name string) {
	t := w.t
	t.Helper()
	ctx := context.Background()
	ew := w.elect
	w.linearizable(name, registerModel)

	accepted, err := w.reg.Accepted(ctx)
	require.NoError(t, err)
	v, err := w.reg.Value(ctx)
	require.NoError(t, err)
	beliefs := ew.tr.Beliefs()
	drift := w.Lockers[0].ClockDrift(w.cfg.TTL) // the clients' Lockers share their options
	overlaps := leadercheck.Overlaps(beliefs, drift)
	var unexplained []string
	for _, o := range overlaps {
		if ok, near := ew.explained(o); !ok {
			unexplained = append(unexplained, fmt.Sprintf("%v; lossy faults near it: %v", o, near))
		}
	}
	outside := leadercheck.OutsideBelief(beliefs, ew.tr.Writes())
	backwards := leadercheck.Backwards(accepted)

	t.Logf("%s: %d operations, %d terms, register %d, faults {%s}, stalls performed %d, overlaps %d (%d across a restart that lost the lock), stale writes rejected %d, failed campaigns %d, accepted terms out of order %d, writes outside a belief %d",
		name, len(w.history), ew.terms.Load(), v, w.faultCounts(), w.stalled.Load(), len(overlaps), len(overlaps)-len(unexplained),
		w.stale.Load(), ew.campaigns.Load(), backwards, len(outside))
	assert.Empty(t, ew.tr.Errors(), "reports that contradict the protocol")
	for _, o := range unexplained {
		t.Errorf("%s: two leaders: %s", name, o)
	}
	assert.Empty(t, leadercheck.TermOrder(beliefs), "terms must strictly increase")
	assert.Empty(t, outside[:min(len(outside), 3)], "writes decided while their writer did not believe it led (%d; the first shown)", len(outside))
	assert.Zero(t, backwards, "the resource accepted a lower term after a higher one")
	assert.Equal(t, int64(len(w.history)), v, "every accepted operation, and only those, changed the register")
	assert.NotEmpty(t, w.history, "no operation succeeded")
	assert.Greater(t, ew.terms.Load(), int64(1), "no leadership changed hands")
	if w.cfg.Long > 0 && w.stalled.Load() > 0 {
		assert.Positive(t, w.stale.Load(), "stalls past the lease must show up as refused writes")
	}
}
