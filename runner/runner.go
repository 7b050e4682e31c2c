package runner

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redfence/redfence/mutex"
)

var (
	// ErrInvalid is matched by errors for bad arguments or configuration.
	ErrInvalid = errors.New("runner: invalid argument")
	// ErrRunning is returned by Add and Run once Run has started.
	ErrRunning = errors.New("runner: already running")
	// ErrNoRun is returned by Last for a job that has not run yet (or whose
	// record expired).
	ErrNoRun = errors.New("runner: no run recorded")
	// ErrShutdown is the cause of a job's context when Run's ctx ended and
	// the shutdown timeout passed with the job still running.
	ErrShutdown = errors.New("runner: shut down")
)

// PanicError is the error a run that panicked ends with.
type PanicError struct {
	Value any
}

func (e *PanicError) Error() string { return fmt.Sprintf("runner: job panicked: %v", e.Value) }

// MinInterval is the shortest interval Add accepts: below it, one Redis round
// trip per replica per tick stops being small next to the interval.
const MinInterval = 10 * time.Millisecond

// Run describes one run of a job, passed to the job.
type Run struct {
	Name    string
	Slot    time.Time // the slot's start, on the Redis server's clock
	Token   int64     // fencing token of the job's lock for this run: pass it to fenced
	Attempt int       // 1, or more with WithRetries
	Replica string    // this replica's id
}

// Job is the work run at each slot. ctx ends when the run's timeout passes,
// the job's lock is lost (context.Cause is mutex.ErrLockLost: stop writing),
// or the runner shuts down past its shutdown timeout.
type Job func(ctx context.Context, run Run) error

// Runner runs named periodic jobs so that each slot of each job runs on
// exactly one replica. It is safe for concurrent use.
type Runner struct {
	locker *mutex.Locker
	client redis.UniversalClient
	cfg    config
	err    error
	tel    *telemetry

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

// New returns a Runner whose jobs lock through locker and keep their slot
// claims and last runs in the locker's Redis. A nil or broken locker or a bad
// option is reported by Add and Run, wrapping ErrInvalid.
func New(locker *mutex.Locker, opts ...Option) *Runner {
	r := &Runner{locker: locker, cfg: newConfig(opts)}
	switch {
	case locker == nil:
		r.err = fmt.Errorf("%w: nil locker", ErrInvalid)
	case locker.Err() != nil:
		r.err = fmt.Errorf("%w: %w", ErrInvalid, locker.Err())
	case len(r.cfg.errs) > 0:
		r.err = fmt.Errorf("%w: %w", ErrInvalid, errors.Join(r.cfg.errs...))
	default:
		r.client = locker.Client()
	}
	r.tel = newTelemetry(r.cfg.tp, r.cfg.mp)
	return r
}

// Add registers a job run every interval. Slots are aligned to multiples of
// every since the Unix epoch on the Redis server's clock, so all replicas
// agree on them. Add fails (wrapping ErrInvalid) on an empty or duplicate
// name, an interval below MinInterval, a nil job or a bad option, and with
// ErrRunning once Run has started.
func (r *Runner) Add(name string, every time.Duration, fn Job, opts ...JobOption) error {
	if r == nil {
		return fmt.Errorf("%w: nil Runner", ErrInvalid)
	}
	if r.err != nil {
		return r.err
	}
	jc := jobConfig{lockTTL: min(max(3*every, time.Second), 30*time.Second)}
	for _, o := range opts {
		if o != nil {
			o.applyJob(&jc)
		}
	}
	switch {
	case name == "":
		return fmt.Errorf("%w: empty job name", ErrInvalid)
	case every < MinInterval:
		return fmt.Errorf("%w: job %q: interval %v below %v", ErrInvalid, name, every, MinInterval)
	case fn == nil:
		return fmt.Errorf("%w: job %q: nil job", ErrInvalid, name)
	case len(jc.errs) > 0:
		return fmt.Errorf("%w: job %q: %w", ErrInvalid, name, errors.Join(jc.errs...))
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.running {
		return ErrRunning
	}
	for _, j := range r.jobs {
		if j.name == name {
			return fmt.Errorf("%w: duplicate job name %q", ErrInvalid, name)
		}
	}
	r.jobs = append(r.jobs, &job{name: name, every: every, fn: fn, cfg: jc})
	return nil
}

// Run runs the jobs until ctx ends, then waits for runs in progress: up to
// the shutdown timeout, after which their contexts end with ErrShutdown and
// Run waits for them to return. It returns nil after a clean shutdown, an
// error when runs had to be cancelled, ErrRunning when called twice, or the
// configuration error. Run can be called once per Runner.
func (r *Runner) Run(ctx context.Context) error {
	if r == nil {
		return fmt.Errorf("%w: nil Runner", ErrInvalid)
	}
	if r.err != nil {
		return r.err
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

// LastRun is the record of a job's most recent run, kept in Redis.
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
// ErrNoRun.
func (r *Runner) Last(ctx context.Context, name string) (LastRun, error) {
	if r == nil {
		return LastRun{}, fmt.Errorf("%w: nil Runner", ErrInvalid)
	}
	if r.err != nil {
		return LastRun{}, r.err
	}
	if name == "" {
		return LastRun{}, fmt.Errorf("%w: empty job name", ErrInvalid)
	}
	b, err := r.client.Get(ctx, r.key(name, "last")).Bytes()
	if errors.Is(err, redis.Nil) {
		return LastRun{}, ErrNoRun
	}
	if err != nil {
		return LastRun{}, fmt.Errorf("runner: last run of %q: %w", name, err)
	}
	var lr LastRun
	if err := json.Unmarshal(b, &lr); err != nil {
		return LastRun{}, fmt.Errorf("runner: last run of %q: %w", name, err)
	}
	return lr, nil
}

// key names the runner's keys of a job; the braces keep them in one Cluster
// slot.
func (r *Runner) key(name, what string) string {
	return r.cfg.prefix + "{" + name + "}:" + what
}
