package processes

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

	"github.com/redfence/redfence/election"
	"github.com/redfence/redfence/fenced"
	"github.com/redfence/redfence/internal/leadercheck"
	"github.com/redfence/redfence/internal/redistest"
	"github.com/redfence/redfence/mutex"
)

// The environment the parent gives its candidate processes.
const (
	envRedis = "REDFENCE_PROCS_REDIS" // the election's redis-server
	envDB    = "REDFENCE_PROCS_DB"    // the fenced resource's database
	// envMutate, set when running the test by hand, makes a mutation the
	// test must catch: "nostop", candidates that go on leading after their
	// loss until their planned end; "fence-any", a resource that accepts
	// any term (unfenced writes to an unprotected table).
	envMutate = "REDFENCE_PROCS_MUTATE"
)

// The election's timing: a lease short enough for many terms in a bounded
// run, the renew deadline and retry period inside client-go's rules.
const (
	lease = 400 * time.Millisecond
	renew = 250 * time.Millisecond
	retry = 50 * time.Millisecond
)

// term is what a candidate process needs of a term (*election.Term): a
// hold it can give up.
type term interface {
	mutex.Hold
	Release(ctx context.Context) error
}

// newElection is the election of a candidate process over l.
func newElection(l *mutex.Locker) (*election.Election, error) {
	return election.New(l, "procs", election.WithTTL(lease), election.WithRenewDeadline(renew), election.WithRetryPeriod(retry))
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
	l, err := redistest.NewLocker(rdb)
	if err != nil {
		t.Fatalf("locker: %v", err)
	}
	e, err := newElection(l)
	if err != nil {
		t.Fatalf("election: %v", err)
	}
	pool, err := pgxpool.New(ctx, os.Getenv(envDB))
	if err != nil {
		t.Fatalf("database: %v", err)
	}
	res, err := newResource(pool)
	if err != nil {
		t.Fatalf("guard: %v", err)
	}
	p := &proc{c: c, l: l, res: res, rng: rand.New(rand.NewPCG(uint64(os.Getpid()), uint64(time.Now().UnixNano())))}
	// Half the processes campaign and resign themselves, the others use Run.
	if p.rng.IntN(2) == 0 {
		for {
			tm, err := e.Campaign(ctx, c.Who)
			if err == nil {
				p.lead(ctx, tm, true)
			} // Redis is not faulted here; a failed campaign is retried
		}
	}
	for {
		_ = e.Run(ctx, c.Who, func(ctx context.Context, tm *election.Term) error {
			p.lead(ctx, tm, false)
			return nil
		})
	}
}

// proc is a candidate process's state.
type proc struct {
	c   *leadercheck.Child
	l   *mutex.Locker
	res *resource
	rng *rand.Rand
}

// lead is one term: report the start, then until a random end or the loss
// of the term (its context ends or its local deadline passes): report
// deadline moves, ask the parent, write through the fence. It resigns at
// the end when resign is set (Run resigns for the others).
func (p *proc) lead(ctx context.Context, tm term, resign bool) {
	token := tm.Token()
	start := time.Now()
	dl := leadercheck.LockDeadline(p.l, token)
	p.report(leadercheck.Event{Kind: leadercheck.KindStart, Term: token, At: start, Deadline: dl})
	until := start.Add(time.Duration(100+p.rng.IntN(1400)) * time.Millisecond) // some terms outlast a pause
	nostop := os.Getenv(envMutate) == "nostop"
	for {
		now := time.Now()
		d := leadercheck.LockDeadline(p.l, token)
		lost := tm.Context().Err() != nil || !now.Before(d)
		if nostop && !now.After(until) {
			lost = false // the mutation: a candidate that goes on after its loss
		}
		if lost || now.After(until) {
			p.report(leadercheck.Event{Kind: leadercheck.KindStop, Term: token, At: now})
			if resign {
				rctx, cancel := context.WithTimeout(ctx, time.Second)
				_ = tm.Release(rctx) // after a loss: nothing to give up
				cancel()
			}
			return
		}
		if !d.IsZero() && !d.Equal(dl) {
			dl = d
			p.report(leadercheck.Event{Kind: leadercheck.KindLease, Term: token, Deadline: dl})
		}
		p.write(ctx, token, now)
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
func (p *proc) write(ctx context.Context, token int64, decided time.Time) {
	if err := p.c.Ask(leadercheck.Event{Term: token, At: decided}); err != nil {
		exit("the parent is gone: %v", err)
	}
	// In flight it goes on after a loss (the fence judges it), so that
	// every write has a known outcome; PostgreSQL is not faulted.
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	err := p.res.write(wctx, token, p.c.Who)
	cancel()
	stale := errors.Is(err, fenced.ErrStaleToken)
	if err != nil && !stale {
		exit("fenced write: %v", err) // the parent fails the test: a process exited on its own
	}
	p.report(leadercheck.Event{Kind: leadercheck.KindWrite, Term: token, At: decided, Accepted: !stale})
}

func (p *proc) report(e leadercheck.Event) {
	if err := p.c.Report(e); err != nil {
		exit("the parent is gone: %v", err)
	}
}

// exit ends the candidate process, saying why on its output.
func exit(format string, args ...any) {
	fmt.Printf("candidate exits: "+format+"\n", args...)
	os.Exit(0)
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

func newResource(pool *pgxpool.Pool) (*resource, error) {
	g, err := fenced.New(pool, fenced.WithTable(fenceTable))
	if err != nil {
		return nil, err
	}
	return &resource{pool: pool, guard: g}, nil
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
