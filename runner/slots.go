package runner

import (
	"context"
	"fmt"
	"time"

	"github.com/redfence/redfence/internal/cause"
	"github.com/redfence/redfence/mutex/backend"
)

// claimSlot claims the current slot through the Locker's backend, which
// has no clock to offer (etcd's): this replica's clock says which slot it
// is and whether it is too late for it, without a request; the backend
// makes the claim once-only, and never lets a lower slot follow a higher
// one. The gap asked between two claims, counted on the backend's servers
// where it can, is what lies between a slot claimed at its grace and the
// next claimed on time: a replica whose clock runs ahead by more than the
// grace finds the gap still closed rather than running its slot that early.
func (r *Runner) claimSlot(ctx context.Context, j *job, g grid, clk *clock, grace time.Duration) (status int, slot int64, err error) {
	now := clk.server() // the replica's clock: the offset stays 0
	slot = g.slotOf(now)
	if g.wall(now)-g.offset-slot*g.every > grace.Milliseconds() {
		return -1, slot, nil
	}
	bound := callTimeout(j.every)
	cctx, cancel := context.WithTimeoutCause(ctx, bound, fmt.Errorf("runner: no result from the backend within %v", bound))
	defer cancel()
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
