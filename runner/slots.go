package runner

import (
	"context"
	"fmt"
	"time"

	"github.com/redfence/redfence/internal/cause"
	"github.com/redfence/redfence/mutex/backend"
)

// claim claims the current slot, if it is no later than grace into it:
// status 1 claimed, 0 claimed already (by anyone), -1 too late (skipped).
// The slot is counted on the backend's servers' clock when it has one
// (Redis's TIME, read first: the offset is taken at the round trip's
// midpoint), else on this replica's (etcd's), without a request; the
// backend makes the claim once-only, and never lets a lower slot follow a higher
// one. The gap asked between two claims, counted on the backend's servers
// where it can, is what lies between a slot claimed at its grace and the
// next claimed on time: a replica whose clock runs ahead by more than the
// grace finds the gap still closed rather than running its slot that early.
func (r *Runner) claim(ctx context.Context, j *job, g grid, clk *clock, grace time.Duration) (status int, slot int64, err error) {
	bound := callTimeout(j.every)
	cctx, cancel := context.WithTimeoutCause(ctx, bound, fmt.Errorf("runner: no result from the backend within %v", bound))
	defer cancel()
	if r.clock != nil {
		sent := clk.now()
		at, err := r.clock.ServerTime(cctx)
		if err != nil {
			return 0, 0, cause.Wrap(cctx, err)
		}
		recv := clk.now()
		clk.offset = at.Sub(sent.Add(recv.Sub(sent) / 2))
	}
	now := clk.server()
	slot = g.slotOf(now)
	if g.wall(now)-g.offset-slot*g.every > grace.Milliseconds() {
		return -1, slot, nil
	}
	claimed, err := r.slots.ClaimSlot(cctx, backend.SlotClaim{
		Key: r.key(j.name, "slot"), Slot: slot, Claimer: r.claimer,
		TTL: claimTTL(j.every), Gap: max(j.every-grace, 0),
	})
	switch {
	case err != nil:
		return 0, 0, cause.Wrap(cctx, err)
	case claimed:
		return 1, slot, nil
	}
	return 0, slot, nil
}
