package elecproc_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"github.com/redfence/redfence/fenced"
	"github.com/redfence/redfence/internal/leadercheck"
	"github.com/redfence/redfence/mutex"
)

// The environment the parent gives its candidate processes.
const (
	envRedis  = "REDFENCE_PROCS_REDIS"  // the election's redis-server
	envDB     = "REDFENCE_PROCS_DB"     // the fenced resource's database
	envMutate = "REDFENCE_PROCS_MUTATE" // a mutation the test must catch (see mutations)
)

// The election's timing: a lease short enough for many terms in a bounded
// run, the renew deadline and retry period inside client-go's rules.
const (
	lease = 400 * time.Millisecond
	renew = 250 * time.Millisecond
	retry = 50 * time.Millisecond
)

// term is what a candidate needs of a term.
type term interface {
	Token() int64
	Context() context.Context
	Resign(ctx context.Context) error
}

// candidate is what a candidate process needs of the election: the test is
// written against it so that it states what it relies on.
type candidate interface {
	Campaign(ctx context.Context, value string) (term, error)
}

// lockTerm is a term over a plain lock (the harness's stand-in until the
// election package was there).
type lockTerm struct{ lk *mutex.Lock }

func (t lockTerm) Token() int64                     { return t.lk.Token() }
func (t lockTerm) Context() context.Context         { return t.lk.Context() }
func (t lockTerm) Resign(ctx context.Context) error { return t.lk.Unlock(ctx) }

type lockCandidate struct{ l *mutex.Locker }

func (c lockCandidate) Campaign(ctx context.Context, _ string) (term, error) {
	lk, err := c.l.Lock(ctx, "election:procs", mutex.WithTTL(lease))
	if err != nil {
		return nil, err
	}
	return lockTerm{lk}, nil
}

// newCandidate is the candidate of a process over l.
func newCandidate(l *mutex.Locker) (candidate, error) { return lockCandidate{l}, nil }

// deadline is the local lease deadline of the lock behind the term with
// token: the last moment the candidate may act as leader (zero when l no
// longer holds it).
func deadline(l *mutex.Locker, token int64) time.Time {
	now := time.Now()
	for _, h := range l.Held() {
		if h.Token == token {
			return now.Add(h.Lease)
		}
	}
	return time.Time{}
}

// TestCandidateProcess is a candidate process of TestFiveProcesses: it
// campaigns, leads for a while writing through the fence, resigns, and
// again, until it is killed or its parent closes its stdin.
func TestCandidateProcess(t *testing.T) {
	c, err := leadercheck.OpenChild()
	if err != nil {
		return // not a child process
	}
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: os.Getenv(envRedis), ContextTimeoutEnabled: true})
	l := mutex.New(rdb)
	cand, err := newCandidate(l)
	if err != nil {
		t.Fatalf("candidate: %v", err)
	}
	pool, err := pgxpool.New(ctx, os.Getenv(envDB))
	if err != nil {
		t.Fatalf("database: %v", err)
	}
	p := &proc{c: c, l: l, res: newResource(pool), rng: rand.New(rand.NewPCG(uint64(os.Getpid()), uint64(time.Now().UnixNano())))}
	for {
		tm, err := cand.Campaign(ctx, c.Who)
		if err != nil {
			continue // Redis is not faulted here; a failed campaign is retried
		}
		if err := p.lead(ctx, tm); err != nil {
			fmt.Println("candidate stops:", err) // the parent closed stdin, or a write failed: the parent fails on the latter
			os.Exit(0)
		}
	}
}

// proc is a candidate process's state.
type proc struct {
	c   *leadercheck.Child
	l   *mutex.Locker
	res *resource
	rng *rand.Rand
}

// lead is one term: report the start, then until a random end (resign) or
// the loss of the term (its context ends or its local deadline passes):
// report deadline moves, ask the parent, write through the fence.
func (p *proc) lead(ctx context.Context, tm term) error {
	token := tm.Token()
	start := time.Now()
	dl := deadline(p.l, token)
	if err := p.c.Report(leadercheck.Event{Kind: leadercheck.KindStart, Term: token, At: start, Deadline: dl}); err != nil {
		return err
	}
	until := start.Add(time.Duration(100+p.rng.IntN(1400)) * time.Millisecond) // some terms outlast a pause
	nostop := os.Getenv(envMutate) == "nostop"
	for {
		now := time.Now()
		d := deadline(p.l, token)
		lost := tm.Context().Err() != nil || !now.Before(d)
		if nostop && !now.After(until) {
			lost = false // the mutation: a candidate that goes on after its loss
		}
		if lost || now.After(until) {
			if err := p.c.Report(leadercheck.Event{Kind: leadercheck.KindStop, Term: token, At: now}); err != nil {
				return err
			}
			rctx, cancel := context.WithTimeout(ctx, time.Second)
			_ = tm.Resign(rctx) // after a loss: not held, expected
			cancel()
			return nil
		}
		if !d.IsZero() && !d.Equal(dl) {
			dl = d
			if err := p.c.Report(leadercheck.Event{Kind: leadercheck.KindLease, Term: token, Deadline: dl}); err != nil {
				return err
			}
		}
		if err := p.write(ctx, token, now); err != nil {
			return err
		}
		wait := time.NewTimer(time.Duration(5+p.rng.IntN(15)) * time.Millisecond)
		select {
		case <-wait.C:
		case <-tm.Context().Done():
			wait.Stop()
		}
	}
}

// write asks the parent (which may pause this process before it answers),
// writes through the fence with token, and reports the outcome; decided is
// when the candidate last saw that it leads.
func (p *proc) write(ctx context.Context, token int64, decided time.Time) error {
	if err := p.c.Ask(leadercheck.Event{Term: token, At: decided}); err != nil {
		return err
	}
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second) // PostgreSQL is not faulted
	err := p.res.write(wctx, token, p.c.Who)
	cancel()
	stale := errors.Is(err, fenced.ErrStaleToken)
	if err != nil && !stale {
		return fmt.Errorf("fenced write: %w", err)
	}
	return p.c.Report(leadercheck.Event{Kind: leadercheck.KindWrite, Term: token, At: decided, Accepted: !stale})
}

// resource is the fenced resource: a counter row in PostgreSQL that only
// the election's current term may change (the table protected by fenced's
// trigger), and the list of accepted terms in commit order.
type resource struct {
	pool  *pgxpool.Pool
	guard *fenced.Guard
}

const (
	fenceTable    = "fences_procs"
	registerTable = "register_procs"
	acceptedTable = "accepted_procs"
	resourceName  = "leader"
)

func newResource(pool *pgxpool.Pool) *resource {
	return &resource{pool: pool, guard: fenced.New(pool, fenced.WithTable(fenceTable))}
}

// write increments the counter and records token, fenced by token: an
// error matching fenced.ErrStaleToken means a newer term has written. Under
// the fence-any mutation it writes unfenced (the parent did not protect the
// table then).
func (r *resource) write(ctx context.Context, token int64, who string) error {
	fn := func(ctx context.Context, tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `UPDATE `+registerTable+` SET v = v + 1 WHERE id = 1`); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `INSERT INTO `+acceptedTable+` (term, who) VALUES ($1, $2)`, token, who)
		return err
	}
	if os.Getenv(envMutate) == "fence-any" {
		return pgx.BeginFunc(ctx, r.pool, func(tx pgx.Tx) error { return fn(ctx, tx) })
	}
	return r.guard.Do(ctx, resourceName, token, fn)
}
