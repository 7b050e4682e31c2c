package processes

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redfence/redfence/internal/leadercheck"
	"github.com/redfence/redfence/internal/redistest"
	"github.com/redfence/redfence/internal/testutil"
)

// runFor is how long the candidates campaign under faults.
const runFor = 10 * time.Second

// TestFiveProcesses: five candidate processes (this test binary again, see
// TestCandidateProcess) campaign on one election over a private
// redis-server and write through fenced (PostgreSQL, the table protected
// by fenced's trigger) while this process pauses them (SIGSTOP, longer
// than the lease), kills them (SIGKILL; a new one takes the place), and
// pauses a leader between its decision to write and the write until a
// newer term has written. Then: no two beliefs of leading overlap beyond
// the drift margin (a paused process's belief ends at the local deadline it
// reported), terms strictly increase, every write was decided while its
// writer believed it led, the resource accepted terms in non-decreasing
// order, and each staged late write was refused.
func TestFiveProcesses(t *testing.T) {
	if os.Getenv(leadercheck.EnvChild) != "" {
		return // a candidate process runs TestCandidateProcess only
	}
	srv := redistest.StartRedis(t)
	res := setupResource(t)
	g := leadercheck.NewGroup("TestCandidateProcess", envRedis+"="+srv.Addr(), envDB+"="+testutil.PostgresURL(t))
	r := newRun(t, g)
	for range 5 {
		r.spawn()
	}
	r.loop(runFor)
	for _, rep := range g.Close() {
		r.handle(rep, true)
	}
	r.check(context.Background(), res)
}

// setupResource creates the register and accepted tables and the fence,
// protects the register with fenced's trigger (not under the fence-any
// mutation), and drops them at the end so that the test can run again.
func setupResource(t *testing.T) *resource {
	pool := testutil.Postgres(t)
	ctx := context.Background()
	_, err := pool.Exec(ctx, `DROP TABLE IF EXISTS `+registerTable+`, `+acceptedTable+`, `+fenceTable+`;
		CREATE TABLE `+registerTable+` (id int PRIMARY KEY, v bigint NOT NULL);
		INSERT INTO `+registerTable+` VALUES (1, 0);
		CREATE TABLE `+acceptedTable+` (seq bigserial PRIMARY KEY, term bigint NOT NULL, who text NOT NULL)`)
	require.NoError(t, err)
	t.Cleanup(func() {
		_, err := pool.Exec(context.Background(), `DROP TABLE IF EXISTS `+registerTable+`, `+acceptedTable+`, `+fenceTable)
		assert.NoError(t, err)
	})
	res, err := newResource(pool)
	require.NoError(t, err)
	require.NoError(t, res.guard.Migrate(ctx))
	if os.Getenv(envMutate) != "fence-any" {
		require.NoError(t, res.guard.Protect(ctx, registerTable, `'`+resourceName+`'`))
	}
	return res
}

// check judges the run.
func (r *run) check(ctx context.Context, res *resource) {
	t := r.t
	beliefs := r.tr.Beliefs()
	margin := lease/100 + 2*time.Millisecond // the Locker's default drift margin
	overlaps := leadercheck.Overlaps(beliefs, margin)
	outside := leadercheck.OutsideBelief(beliefs, r.tr.Writes())
	rows, err := res.pool.Query(ctx, `SELECT term FROM `+acceptedTable+` ORDER BY seq`)
	require.NoError(t, err)
	accepted, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	require.NoError(t, err)
	var v int64
	require.NoError(t, res.pool.QueryRow(ctx, `SELECT v FROM `+registerTable+` WHERE id = 1`).Scan(&v))
	refused := 0
	for _, w := range r.tr.Writes() {
		if !w.Accepted {
			refused++
		}
	}

	t.Logf("%d terms, %d writes accepted, %d refused (%d of %d staged late writes), pauses %d (%d of the leader), kills %d, overlaps %d, writes outside a belief %d",
		len(beliefs), len(accepted), refused, r.stagedRefused, r.stagedTotal, r.pauses, r.leaderPauses, r.kills, len(overlaps), len(outside))
	assert.Empty(t, r.tr.Errors(), "reports that contradict the protocol")
	for _, o := range overlaps {
		t.Errorf("two leaders: %v; what they did and had done to them:\n%s", o, r.trailOf(o))
	}
	assert.Empty(t, leadercheck.TermOrder(beliefs), "terms must strictly increase")
	assert.Empty(t, outside[:min(len(outside), 3)], "writes decided while their writer did not believe it led (%d; the first shown)", len(outside))
	assert.Zero(t, leadercheck.Backwards(accepted), "the resource accepted a lower term after a higher one")
	assert.Equal(t, int64(len(accepted)), v, "every accepted write, and only those, changed the register")
	assert.GreaterOrEqual(t, len(beliefs), 5, "too few terms to judge")
	assert.Positive(t, r.leaderPauses, "no leader was paused")
	assert.Positive(t, r.kills, "no process was killed")
	assert.Positive(t, r.stagedTotal, "no late write was staged")
	assert.Equal(t, r.stagedTotal, r.stagedRefused, "every staged late write (of a deposed leader, after a newer term wrote) must be refused")
}

// fault is one of the faults the loop injects in turn.
type fault func(r *run)

var faults = []fault{
	func(r *run) { r.pause(r.leader, true) },
	stage,
	func(r *run) { r.kill(r.leader) },
	stage,
	func(r *run) { r.pause(r.any(), false) },
	stage,
	func(r *run) { r.kill(r.any()) },
}

// stage makes the leader's next write late: it is paused at its ask until
// a newer term has written (often enough that a slow run stages a few).
func stage(r *run) { r.stage = true }

// run is the parent's state; only its loop's goroutine touches it.
type run struct {
	t       *testing.T
	g       *leadercheck.Group
	tr      *leadercheck.Tracker
	rng     *rand.Rand
	procs   map[string]*leadercheck.Proc
	killed  map[string]bool
	paused  map[string]time.Time // resumed then
	spawned int
	running bool

	leader string // who started the latest term
	term   int64
	stage  bool             // pause the leader at its next ask, until a newer term wrote
	staged map[string]int64 // paused at an ask with this term
	late   map[string]int64 // resumed: its next write, with this term, must be refused

	pauses, leaderPauses, kills, stagedTotal, stagedRefused int
	trail                                                   []note // for a failure's message
}

// note is one line of the trail: a report received or a signal sent.
type note struct {
	at   time.Time
	who  string
	what string
}

func (r *run) note(who, what string) { r.trail = append(r.trail, note{time.Now(), who, what}) }

// trailOf is the trail of o's two processes around it, by the parent's
// clock (a report is noted when it arrived).
func (r *run) trailOf(o leadercheck.Overlap) string {
	var b strings.Builder
	from, to := o.A.Start.Add(-time.Second), o.B.End.Add(time.Second)
	for _, n := range r.trail {
		if (n.who == o.A.Who || n.who == o.B.Who) && n.at.After(from) && n.at.Before(to) {
			fmt.Fprintf(&b, "  %s %s %s\n", n.at.Format("15:04:05.000000"), n.who, n.what)
		}
	}
	return b.String()
}

func newRun(t *testing.T, g *leadercheck.Group) *run {
	return &run{t: t, g: g, tr: leadercheck.NewTracker(), rng: rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 38)),
		procs: map[string]*leadercheck.Proc{}, killed: map[string]bool{}, paused: map[string]time.Time{},
		staged: map[string]int64{}, late: map[string]int64{}, running: true}
}

func (r *run) spawn() {
	r.spawned++
	who := fmt.Sprintf("p%03d", r.spawned)
	p, err := r.g.Spawn(who)
	require.NoError(r.t, err)
	r.procs[who] = p
}

// loop handles reports and injects a fault every 200-500 ms for d.
func (r *run) loop(d time.Duration) {
	end := time.NewTimer(d)
	defer end.Stop()
	tick := time.NewTicker(10 * time.Millisecond) // resumes paused processes when due
	defer tick.Stop()
	nextFault := time.Now().Add(300 * time.Millisecond)
	for i := 0; ; {
		select {
		case rep := <-r.g.Reports():
			r.handle(rep, false)
		case now := <-tick.C:
			r.resumeDue(now)
			if now.After(nextFault) {
				faults[i%len(faults)](r)
				i++
				nextFault = now.Add(time.Duration(200+r.rng.IntN(300)) * time.Millisecond)
			}
		case <-end.C:
			r.running = false
			return
		}
	}
}

// handle applies one report; after the run (closing) it only records.
func (r *run) handle(rep leadercheck.Report, closing bool) {
	t := r.t
	switch {
	case rep.Err != nil:
		t.Errorf("%s: %v", rep.Who, rep.Err)
	case rep.Gone:
		r.gone(rep.Who, closing)
	default:
		e := rep.Event
		r.tr.Apply(rep.Who, e)
		r.note(rep.Who, "reports "+e.String())
		switch e.Kind {
		case leadercheck.KindStart:
			r.leader, r.term = rep.Who, e.Term
		case leadercheck.KindAsk:
			if !closing {
				r.ask(rep.Who, e.Term)
			}
		case leadercheck.KindWrite:
			r.wrote(rep.Who, e.Term, e.Accepted)
		}
	}
}

// ask lets who write, or (a staged late write) pauses it first, until a
// newer term has written.
func (r *run) ask(who string, term int64) {
	p := r.procs[who]
	if p == nil {
		return
	}
	if r.stage && who == r.leader && term == r.term && r.paused[who].IsZero() {
		r.stage = false
		require.NoError(r.t, p.Pause())
		r.note(who, "paused at its ask (staged)")
		r.staged[who] = term
	}
	require.NoError(r.t, p.Go())
}

// wrote resumes the staged processes whose term a newer one has overtaken,
// and checks a resumed one's late write.
func (r *run) wrote(who string, term int64, accepted bool) {
	if want, ok := r.late[who]; ok && want == term {
		delete(r.late, who)
		if accepted {
			r.t.Errorf("%s's write with term %d was accepted after a newer term wrote", who, term)
		} else {
			r.stagedRefused++
		}
	}
	if !accepted {
		return
	}
	for s, st := range r.staged {
		if term > st {
			delete(r.staged, s)
			require.NoError(r.t, r.procs[s].Resume())
			r.note(s, "resumed (staged)")
			r.late[s] = st
			r.stagedTotal++
		}
	}
}

func (r *run) gone(who string, closing bool) {
	r.tr.Gone(who)
	p := r.procs[who]
	delete(r.procs, who)
	delete(r.paused, who)
	delete(r.staged, who)
	if _, ok := r.late[who]; ok {
		delete(r.late, who)
		r.stagedTotal-- // killed before its late write: not judged
	}
	if !r.killed[who] && !closing {
		r.t.Errorf("%s exited on its own:\n%s", who, p.Output())
	}
	if r.running {
		r.spawn()
	}
}

// pause stops who for 1.5-3 leases.
func (r *run) pause(who string, leader bool) {
	p := r.procs[who]
	if p == nil || !r.paused[who].IsZero() || r.staged[who] != 0 {
		return
	}
	require.NoError(r.t, p.Pause())
	r.note(who, "paused")
	r.paused[who] = time.Now().Add(lease*3/2 + time.Duration(r.rng.Int64N(int64(lease*3/2))))
	r.pauses++
	if leader {
		r.leaderPauses++
	}
}

func (r *run) resumeDue(now time.Time) {
	for who, at := range r.paused {
		if now.After(at) {
			delete(r.paused, who)
			require.NoError(r.t, r.procs[who].Resume())
			r.note(who, "resumed")
		}
	}
}

func (r *run) kill(who string) {
	p := r.procs[who]
	if p == nil || r.killed[who] {
		return
	}
	r.killed[who] = true
	require.NoError(r.t, p.Kill())
	r.note(who, "killed")
	r.kills++
}

// any is a random live process.
func (r *run) any() string {
	n := r.rng.IntN(len(r.procs))
	for who := range r.procs {
		if n == 0 {
			return who
		}
		n--
	}
	return ""
}
