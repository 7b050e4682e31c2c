package runner

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/redfence/redfence/internal/cause"
	invalidpkg "github.com/redfence/redfence/internal/invalid"
	"github.com/redfence/redfence/mutex"
	"github.com/redfence/redfence/mutex/backend"
)

var (
	// ErrInvalid is mutex.ErrInvalid, matched by errors for bad arguments
	// or configuration.
	ErrInvalid = mutex.ErrInvalid
	// ErrRunning is returned by Add and Run once Run has started.
	ErrRunning = errors.New("runner: already running")
	// ErrNoRun is returned by Last for a job that has not run yet (or whose
	// record expired).
	ErrNoRun = errors.New("runner: no run recorded")
	// ErrShutdown is the cause of a job's context when Run's ctx ended and
	// the shutdown timeout passed with the job still running.
	ErrShutdown = errors.New("runner: shut down")
	// ErrNeedsRedis is matched, with ErrInvalid, by New's error for a
	// Locker with nowhere to keep its slot claims: its backend is no
	// backend.SlotClaimer. Redlock's is one: its masters hold no single copy
	// of the claims. One Redis deployment's (redisdriver) and etcd's claim
	// slots.
	ErrNeedsRedis = invalid("the Locker's backend claims no slots")
)

// PanicError is the error a run that panicked ends with.
type PanicError struct {
	Value any
}

func (e *PanicError) Error() string { return fmt.Sprintf("runner: job panicked: %v", e.Value) }

// Limits on what Add accepts.
const (
	// MinInterval is the shortest interval: below it, one round trip
	// per replica per tick stops being small next to the interval.
	MinInterval = 10 * time.Millisecond
	// MaxInterval is the longest interval: the claim and record lifetimes
	// derived from it (ten intervals) stay far from overflowing a Duration.
	MaxInterval = 365 * 24 * time.Hour
	// MaxNameLen is the longest job name, in bytes: every key derived
	// from a name (its lock, its slot claim, its last run) stays well under
	// the key limits of mutex.
	MaxNameLen = 256
)

// Run describes one run of a job, passed to the job.
type Run struct {
	Name string
	// Slot is the slot's start, on the clock that counts the slots: the
	// Redis server's, or this replica's over a backend that claims slots
	// (etcd; see the package doc).
	Slot    time.Time
	Token   int64  // fencing token of the job's lock for this run: pass it to fenced
	Attempt int    // 1, or more with WithRetries
	Replica string // this replica's id
}

// Job is the work run at each slot. ctx ends when the run's timeout passes,
// the job's lock is lost (context.Cause is mutex.ErrLockLost: stop writing),
// or the runner shuts down past its shutdown timeout.
type Job func(ctx context.Context, run Run) error

// Runner runs named periodic jobs so that each slot of each job runs on
// exactly one replica. It is safe for concurrent use.
type Runner struct {
	locker *mutex.Locker
	// slots keeps the claims and records in the Locker's backend; clock,
	// when the backend has one, counts the slots on its servers (nil: on
	// this replica's clock). claimer names this Runner's claims there.
	slots   backend.SlotClaimer
	clock   backend.ServerClock
	claimer string
	cfg     config
	tel     *telemetry

	mu      sync.Mutex
	jobs    []*job
	running bool
}

type job struct {
	name  string
	every time.Duration
	fn    Job
	cfg   jobConfig
}

func (j *job) grid() grid {
	g := grid{every: j.every.Milliseconds(), offset: j.cfg.offset.Milliseconds(), loc: j.cfg.loc}
	if g.loc == time.UTC {
		g.loc = nil // the same clock, without a zone to look up
	}
	return g
}

// New returns a Runner whose jobs lock through locker and keep their slot
// claims and last runs in the locker's backend, a backend.SlotClaimer (one
// Redis deployment's, or etcd's: see the package doc). A nil locker or a
// bad option returns an error matching ErrInvalid, and so does a Locker
// whose backend claims no slots (ErrNeedsRedis too): Redlock's, whose
// masters hold no single copy of the claims. New does no I/O.
func New(locker *mutex.Locker, opts ...Option) (*Runner, error) {
	if locker == nil {
		return nil, invalid("nil locker")
	}
	cfg := newConfig(opts)
	if len(cfg.errs) > 0 {
		return nil, invalid("%v", errors.Join(cfg.errs...))
	}
	// The backend must keep the claims itself. Redlock's cannot: they
	// would rest on one of its masters, silently.
	sc, ok := locker.Backend().(backend.SlotClaimer)
	if !ok {
		return nil, fmt.Errorf("%w (Redlock, or another backend that is no backend.SlotClaimer): give it a Locker over one Redis deployment or etcd", ErrNeedsRedis)
	}
	r := &Runner{locker: locker, slots: sc, claimer: rand.Text(), cfg: cfg}
	r.clock, _ = locker.Backend().(backend.ServerClock)
	r.tel = newTelemetry(cfg.tp, cfg.mp)
	return r, nil
}

// Add registers a job run every interval. Slots are aligned to multiples of
// every since the Unix epoch on the backend's clock (Redis's; the
// replica's own over etcd, see the package doc), so all replicas agree on
// them: a 24 h job runs at 00:00 UTC unless WithOffset and
// WithLocation place it elsewhere. Add fails, wrapping ErrInvalid and
// registering nothing, on an empty name or one longer than MaxNameLen
// bytes, a duplicate name, an interval outside [MinInterval, MaxInterval]
// or not a whole number of milliseconds (the server's clock counts in
// them), a nil job, a jitter or an offset not below the interval or a bad
// option; and with ErrRunning once Run has started. It does no I/O.
func (r *Runner) Add(name string, every time.Duration, fn Job, opts ...JobOption) error {
	if err := r.check(); err != nil {
		return err
	}
	switch {
	case name == "":
		return invalid("empty job name")
	case len(name) > MaxNameLen:
		return invalid("job name of %d bytes exceeds %d", len(name), MaxNameLen)
	case every < MinInterval || every > MaxInterval:
		return invalid("job %q: interval %v outside [%v, %v]", name, every, MinInterval, MaxInterval)
	case every%time.Millisecond != 0:
		return invalid("job %q: interval %v is not a whole number of milliseconds", name, every)
	case fn == nil:
		return invalid("job %q: nil job", name)
	}
	jc := jobConfig{lockTTL: min(max(3*every, time.Second), 30*time.Second)}
	for _, o := range opts {
		if o != nil {
			o.applyJob(&jc)
		}
	}
	switch {
	case len(jc.errs) > 0:
		return invalid("job %q: %v", name, errors.Join(jc.errs...))
	case jc.jitter >= every:
		// Jitter delays the claim too: at an interval or more, it would
		// push it into a later slot.
		return invalid("job %q: jitter %v not below the interval %v", name, jc.jitter, every)
	case jc.offset >= every:
		return invalid("job %q: offset %v not below the interval %v", name, jc.offset, every)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.running {
		return ErrRunning
	}
	for _, j := range r.jobs {
		if j.name == name {
			return invalid("duplicate job name %q", name)
		}
	}
	r.jobs = append(r.jobs, &job{name: name, every: every, fn: fn, cfg: jc})
	return nil
}

// Run runs the jobs until ctx ends, then waits for runs in progress: up to
// the shutdown timeout, after which their contexts end with ErrShutdown and
// Run waits for them to return. It returns nil after a clean shutdown, an
// error when runs had to be cancelled, ErrRunning when called twice, or the
// configuration error (wrapping ErrInvalid, as does a nil ctx; then nothing
// was started). Run can be called once per Runner.
func (r *Runner) Run(ctx context.Context) error {
	if err := r.check(); err != nil {
		return err
	}
	if ctx == nil {
		return invalid("nil context")
	}
	r.mu.Lock()
	if r.running {
		r.mu.Unlock()
		return ErrRunning
	}
	r.running = true
	jobs := r.jobs
	r.mu.Unlock()

	// hard ends the runs themselves: only after the shutdown timeout.
	hard, stopHard := context.WithCancelCause(context.WithoutCancel(ctx))
	defer stopHard(nil)
	var wg sync.WaitGroup
	for _, j := range jobs {
		wg.Go(func() { r.loop(ctx, hard, j) })
	}
	<-ctx.Done()

	finished := make(chan struct{})
	go func() { wg.Wait(); close(finished) }()
	t := time.NewTimer(r.cfg.shutdown)
	defer t.Stop()
	select {
	case <-finished:
		return nil
	case <-t.C:
		stopHard(ErrShutdown)
		<-finished
		return fmt.Errorf("runner: runs still in progress after %v were cancelled", r.cfg.shutdown)
	}
}

// LastRun is the record of a job's most recent run, kept beside the slot
// claims (in Redis, or the backend's).
type LastRun struct {
	Slot     time.Time     `json:"slot"`
	Replica  string        `json:"replica"`
	Token    int64         `json:"token"`
	Attempts int           `json:"attempts"`
	Outcome  string        `json:"outcome"` // "ok", "error", "panic" or "lock_lost"
	Error    string        `json:"error,omitempty"`
	Started  time.Time     `json:"started"`
	Duration time.Duration `json:"duration"`
}

// Last returns the record of name's most recent run on any replica, or
// ErrNoRun. A nil ctx, an empty name or one longer than MaxNameLen is
// rejected, wrapping ErrInvalid, before any I/O.
func (r *Runner) Last(ctx context.Context, name string) (LastRun, error) {
	if err := r.check(); err != nil {
		return LastRun{}, err
	}
	switch {
	case ctx == nil:
		return LastRun{}, invalid("nil context")
	case name == "":
		return LastRun{}, invalid("empty job name")
	case len(name) > MaxNameLen:
		return LastRun{}, invalid("job name of %d bytes exceeds %d", len(name), MaxNameLen)
	}
	b, err := r.lastRecord(ctx, name)
	if err != nil {
		return LastRun{}, err
	}
	var lr LastRun
	if err := json.Unmarshal(b, &lr); err != nil {
		return LastRun{}, fmt.Errorf("runner: last run of %q: %w", name, err)
	}
	return lr, nil
}

// lastRecord reads name's record of its last run, or ErrNoRun.
func (r *Runner) lastRecord(ctx context.Context, name string) ([]byte, error) {
	b, found, err := r.slots.GetRecord(ctx, r.key(name, "last"))
	switch {
	case err != nil:
		return nil, fmt.Errorf("runner: last run of %q: %w", name, cause.Wrap(ctx, err))
	case !found:
		return nil, ErrNoRun
	}
	return b, nil
}

// check returns the error every call of r returns when r is nil or was not
// made by New (a zero Runner has nowhere to claim slots).
func (r *Runner) check() error {
	switch {
	case r == nil:
		return invalid("nil Runner")
	case r.slots == nil:
		return invalid("Runner not made by New")
	}
	return nil
}

// key names the runner's keys of a job; the braces keep them in one Cluster
// slot.
func (r *Runner) key(name, what string) string {
	return r.cfg.prefix + "{" + name + "}:" + what
}

func invalid(format string, args ...any) error { return invalidpkg.Errorf("runner", format, args...) }
