package chaoskit

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redfence/redfence/internal/leadercheck"
	"github.com/redfence/redfence/internal/testutil"
	"github.com/redfence/redfence/mutex"
)

// Permits is the semaphore workload's limit: fewer than Clients, so that
// the clients contend for permits and some always wait.
const Permits = 2

// semWork is the state of the semaphore workload.
type semWork struct {
	pool  *pgxpool.Pool
	table string
	tr    *leadercheck.Tracker // each permit as a belief: who, token, grant to its end

	refused  atomic.Int64 // writes the holder refused: its permit had ended
	accepted atomic.Int64 // writes committed
}

// NewSemaphore is a run of the semaphore workload: each client takes a
// permit of one semaphore of Permits over its Locker, makes one to three
// writes to a PostgreSQL table while it holds it (each checks, inside its
// transaction right before the commit, that the permit is still live),
// and releases it. Faults named in LossyFaults lose the holders in the
// store (a restart empty, a failover to a replica that lacks them). Check
// then judges the permits against a model of a counting semaphore, and
// the writes against the permits.
func NewSemaphore(t *testing.T, name string, cfg Config) *World {
	pool := testutil.Postgres(t)
	table := "semaphore_" + name
	_, err := pool.Exec(context.Background(), `CREATE TABLE `+table+` (seq bigserial PRIMARY KEY, client int NOT NULL, token bigint NOT NULL)`)
	require.NoError(t, err)
	t.Cleanup(func() {
		_, err := pool.Exec(context.Background(), `DROP TABLE IF EXISTS `+table)
		assert.NoError(t, err)
	})
	w := New(t, nil, cfg)
	w.sem = &semWork{pool: pool, table: table, tr: leadercheck.NewTracker()}
	return w
}

// semAcquired is a permit granted: the model's acquire(token), between the
// call of Acquire and its return (the grant is between them).
type semAcquired struct{ token int64 }

// semEnded is a permit given up or lost, from the end of its holder's
// belief (the earliest of its release, its loss and its local deadline:
// the store may free it no earlier) to the return of Release.
type semEnded struct{ token int64 }

// semLossy opens (at the start of a fault that loses the store's holders
// being applied or healed) or closes (at its end) a window in which the
// store may lose holders and, while a failover's old primary still takes
// writes, grant permits from two sets of holders at once.
type semLossy struct{ open bool }

// semClient is one worker of the semaphore workload: one Semaphore that
// renews its permits, and one that does not, for the stalling turns.
func (w *World) semClient(ctx context.Context, id int, l *mutex.Locker) {
	renewed, err := mutex.NewSemaphore(l, "chaos-sem", Permits, mutex.WithTTL(w.cfg.TTL))
	if err != nil {
		w.t.Errorf("client %d: semaphore: %v", id, err)
		return
	}
	stalling, err := mutex.NewSemaphore(l, "chaos-sem", Permits, mutex.WithTTL(w.cfg.TTL), mutex.WithAutoRenew(false))
	if err != nil {
		w.t.Errorf("client %d: semaphore: %v", id, err)
		return
	}
	rng := rand.New(rand.NewPCG(uint64(id), uint64(time.Now().UnixNano())))
	for ctx.Err() == nil {
		if w.stalls[id].Swap(false) {
			w.holdPermit(ctx, id, stalling, rng, true)
			continue
		}
		w.holdPermit(ctx, id, renewed, rng, false)
	}
}

// holdPermit is one turn: Acquire, maybe stall past the lease (the permit
// is not renewed then), one to three writes a few ms apart, Release.
func (w *World) holdPermit(ctx context.Context, id int, s *mutex.Semaphore, rng *rand.Rand, stall bool) {
	call := time.Now()
	actx, cancel := context.WithTimeout(ctx, lockDeadline)
	p, err := s.Acquire(actx)
	cancel()
	if err != nil {
		w.lockErrs.Add(1)
		return
	}
	got := time.Now()
	var lostAt atomic.Pointer[time.Time]
	stop := context.AfterFunc(p.Context(), func() { now := time.Now(); lostAt.Store(&now) })
	defer stop()
	w.record(id, call, got, semAcquired{p.Token()})
	if w.holders.Add(1) > Permits {
		w.overlaps.Add(1)
	}
	if stall {
		w.stalled.Add(1)
		time.Sleep(w.cfg.Stall) // the stall itself, as a stopped process's: not a synchronisation
	}
	for range 1 + rng.IntN(3) {
		w.semWrite(ctx, id, p)
		wait := time.NewTimer(time.Duration(2+rng.IntN(10)) * time.Millisecond)
		select {
		case <-wait.C:
		case <-p.Context().Done():
			wait.Stop()
		}
	}
	released := time.Now()
	deadline := p.Deadline()
	w.holders.Add(-1)
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), w.cfg.Release)
	_ = p.Release(rctx) // ErrNotHeld after a loss is expected here
	cancel()
	end := earliest(released, deadline, lostAt.Load())
	if end.Before(got) {
		end = got // an end before the grant was seen: the model's end must follow its acquire
	}
	w.record(id, end, time.Now(), semEnded{p.Token()})
	who := fmt.Sprintf("client%d", id)
	w.sem.tr.Start(who, p.Token(), got, deadline)
	w.sem.tr.Stop(who, p.Token(), end)
}

// earliest is the earliest of a, b and c (when c is not nil).
func earliest(a, b time.Time, c *time.Time) time.Time {
	if b.Before(a) {
		a = b
	}
	if c != nil && c.Before(a) {
		a = *c
	}
	return a
}

// record appends an operation of the model, from call to ret.
func (w *World) record(id int, call, ret time.Time, out any) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.history = append(w.history, porcupine.Operation{ClientId: id,
		Call: call.Sub(w.start).Nanoseconds(), Return: ret.Sub(w.start).Nanoseconds(), Output: out})
}

// semWrite is one write under p: a row of the client and the token,
// committed only if the permit is still live right before the commit (its
// context not done, its local deadline ahead); else rolled back.
func (w *World) semWrite(ctx context.Context, id int, p *mutex.Permit) {
	sw := w.sem
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), writeDeadline)
	defer cancel()
	var decided time.Time
	err := pgx.BeginFunc(wctx, sw.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(wctx, `INSERT INTO `+sw.table+` (client, token) VALUES ($1, $2)`, id, p.Token()); err != nil {
			return err
		}
		decided = time.Now()
		if p.Context().Err() != nil || !decided.Before(p.Deadline()) {
			return errPermitEnded
		}
		return nil
	})
	switch {
	case errors.Is(err, errPermitEnded):
		sw.refused.Add(1)
		w.stale.Add(1)
	case err != nil:
		w.t.Errorf("client %d: write: %v", id, err)
		return
	default:
		sw.accepted.Add(1)
	}
	sw.tr.Write(leadercheck.Write{Who: fmt.Sprintf("client%d", id), Term: p.Token(), Decided: decided, Accepted: err == nil})
}

var errPermitEnded = errors.New("the permit ended before the commit")
