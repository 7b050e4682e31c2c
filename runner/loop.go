package runner

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/redfence/redfence/internal/cause"
	"github.com/redfence/redfence/mutex"
)

// callTimeout bounds one Redis call of the loop: a hung server costs a tick,
// not the job.
func callTimeout(every time.Duration) time.Duration {
	return min(max(every/2, 50*time.Millisecond), 2*time.Second)
}

// clock tracks the offset between the replica's clock and the Redis server's,
// measured at every claim, so that local timers fire at the server's slot
// boundaries whatever the local clock says. Over a backend.SlotClaimer the
// offset stays 0: the replica's clock counts the slots.
type clock struct {
	now    func() time.Time
	offset time.Duration // server - local
}

func (c *clock) server() time.Time { return c.now().Add(c.offset) }

// loop is one job's life on this replica: wake at the next slot boundary,
// claim the slot, run it if claimed, repeat until ctx ends.
func (r *Runner) loop(ctx, hard context.Context, j *job) {
	clk := &clock{now: r.cfg.clock}
	every := j.every
	g := j.grid()
	catchUp := j.cfg.missed == RunOnce // after an outage, RunOnce runs the current slot late
	wait := time.Duration(0)
	for {
		if !sleep(ctx, wait) {
			return
		}
		grace := every/2 + j.cfg.jitter
		if catchUp {
			grace = every
		}
		status, slot, err := r.claim(ctx, j, g, clk, grace)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			r.report(j, Run{Name: j.name}, fmt.Errorf("runner: claim %q: %w", j.name, err))
			wait = min(every, time.Second)
			continue
		}
		catchUp = false
		switch status {
		case 1:
			r.runSlot(ctx, hard, j, g, clk, slot)
			// A run that outlasted its slot: RunOnce runs the slot it ran
			// into at once, Skip waits for the next boundary.
			if j.cfg.missed == RunOnce && g.slotOf(clk.server()) > slot {
				catchUp = true
				wait = 0
				continue
			}
		case -1:
			r.tel.skipped(ctx, j.name, "late")
		}
		now := clk.server()
		wait = g.start(g.slotOf(now) + 1).Sub(now)
		if j.cfg.jitter > 0 {
			wait += rand.N(j.cfg.jitter)
		}
	}
}

func sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// claimTTL is how long a job's last claim is kept: ten intervals and a
// minute, then the job's key goes away (a removed job leaves nothing).
func claimTTL(every time.Duration) time.Duration { return 10*every + time.Minute }

// runSlot takes the job's lock and runs the claimed slot, under the slot's
// span: the lock's acquisition, each attempt and the release are its
// children.
func (r *Runner) runSlot(ctx, hard context.Context, j *job, g grid, clk *clock, slot int64) {
	slotStart := g.start(slot)
	ctx, span := r.tel.startSlot(ctx, j.name, lockKey(j.name), slotStart)
	lk, outcome := r.lockSlot(ctx, j, g, clk, slot)
	if lk != nil {
		span.token(lk.Token())
		outcome = r.runLocked(ctx, hard, j, clk, lk, slotStart)
	}
	span.end(outcome)
}

// lockKey is the job's lock, as mutex's spans and the redfence command name
// it.
func lockKey(name string) string { return KeyPrefix + name }

// lockSlot takes the job's lock for slot, or says why not: "overlap" (a
// run, here or elsewhere, still holds it) or "error". The lock keeps a run
// that outlasts its interval from overlapping the next slot's: with Skip
// that slot is dropped at once, with RunOnce its claimer waits for the lock
// until the slot ends.
func (r *Runner) lockSlot(ctx context.Context, j *job, g grid, clk *clock, slot int64) (*mutex.Lock, string) {
	every := j.every
	lockOpts := []mutex.LockOption{mutex.WithTTL(j.cfg.lockTTL)}
	var lk *mutex.Lock
	var err error
	if j.cfg.missed == RunOnce {
		lctx, cancel := context.WithTimeout(ctx, max(g.start(slot+1).Sub(clk.server()), callTimeout(every)))
		lk, err = r.locker.Lock(lctx, lockKey(j.name), lockOpts...)
		err = cause.Wrap(lctx, err)
		cancel()
	} else {
		lctx, cancel := context.WithTimeout(ctx, callTimeout(every))
		lk, err = r.locker.TryLock(lctx, lockKey(j.name), lockOpts...)
		err = cause.Wrap(lctx, err)
		cancel()
	}
	switch {
	case err == nil:
		return lk, ""
	case errors.Is(err, mutex.ErrNotAcquired) && !errors.Is(err, mutex.ErrUnavailable):
		// The previous run, here or elsewhere, still holds the job.
		r.tel.overlapPrevented(ctx, j.name)
		r.tel.skipped(ctx, j.name, "overlap")
		return nil, "overlap"
	}
	r.report(j, Run{Name: j.name, Slot: g.start(slot)}, fmt.Errorf("runner: lock %q: %w", j.name, err))
	return nil, "error"
}

// runLocked runs the slot under lk, retrying as configured, records the
// run, releases lk and returns the run's outcome.
func (r *Runner) runLocked(ctx, hard context.Context, j *job, clk *clock, lk *mutex.Lock, slotStart time.Time) string {
	defer func() {
		uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), callTimeout(j.every))
		defer cancel()
		_ = lk.Release(uctx) // ErrNotHeld after a loss: nothing to release
	}()
	if j.cfg.jitter > 0 {
		// Jitter delays the run, not the claim: the slot is ours already.
		if !sleep(lk.Context(), rand.N(j.cfg.jitter)) {
			if errors.Is(context.Cause(lk.Context()), mutex.ErrLockLost) {
				return "lock_lost"
			}
			return "error" // released: the Locker closed
		}
	}
	run := Run{Name: j.name, Slot: slotStart, Token: lk.Token(), Replica: r.cfg.replica}
	started := time.Now()
	r.tel.lag(ctx, j.name, clk.server().Sub(slotStart))

	jctx, cancel := lk.Join(hard)
	defer cancel()
	if j.cfg.timeout > 0 {
		var c context.CancelFunc
		jctx, c = context.WithTimeout(jctx, j.cfg.timeout)
		defer c()
	}

	var runErr error
	// attempt-1, not 1+retries: WithRetries(math.MaxInt) must not wrap.
	for attempt := 1; attempt-1 <= j.cfg.retries; attempt++ {
		run.Attempt = attempt
		runErr = r.call(jctx, j, run)
		if runErr == nil || jctx.Err() != nil {
			break
		}
	}
	outcome := "ok"
	var pe *PanicError
	switch {
	case errors.Is(context.Cause(lk.Context()), mutex.ErrLockLost):
		outcome = "lock_lost"
		r.tel.lockLost(ctx, j.name)
	case errors.As(runErr, &pe):
		outcome = "panic"
	case runErr != nil:
		outcome = "error"
	}
	if runErr != nil {
		r.report(j, run, runErr)
	}
	r.tel.ran(ctx, j.name, outcome)
	r.record(ctx, j, run, outcome, runErr, started)
	return outcome
}

// call runs the job once, turning a panic into a *PanicError.
func (r *Runner) call(ctx context.Context, j *job, run Run) (err error) {
	ctx, end := r.tel.startRun(ctx, run)
	defer func() {
		if v := recover(); v != nil {
			err = &PanicError{Value: v}
		}
		end(err)
	}()
	return j.fn(ctx, run)
}

func (r *Runner) report(j *job, run Run, err error) {
	if r.cfg.onError != nil {
		r.cfg.onError(j.name, run, err)
	}
}

// record keeps the run for Last, in Redis or the backend.
func (r *Runner) record(ctx context.Context, j *job, run Run, outcome string, runErr error, started time.Time) {
	lr := LastRun{Slot: run.Slot, Replica: run.Replica, Token: run.Token, Attempts: run.Attempt,
		Outcome: outcome, Started: started, Duration: time.Since(started)}
	if runErr != nil {
		lr.Error = runErr.Error()
	}
	b, err := json.Marshal(lr)
	if err != nil {
		return
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), callTimeout(j.every))
	defer cancel()
	ttl := max(24*time.Hour, 10*j.every)
	err = r.slots.PutRecord(rctx, r.key(j.name, "last"), b, ttl)
	if err != nil {
		r.report(j, run, fmt.Errorf("runner: record last run of %q: %w", j.name, cause.Wrap(rctx, err)))
	}
}

// KeyPrefix begins the key of every lock the runner takes: a job named
// "nightly" is locked as "runner:nightly" (the Locker adds its own prefix,
// redfence:{runner:nightly}); `redfence inspect` names it so.
const KeyPrefix = "runner:"
