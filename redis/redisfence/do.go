package redisfence

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redfence/redfence/fenced/fence"
	"github.com/redfence/redfence/internal/cause"
)

// Do applies fn's writes to resource's keys if token is not lower than the
// highest token recorded for resource, and records token with them, in one
// MULTI/EXEC.
//
// Do WATCHes the fence key and keys, reads the highest token, and, when
// token is lower, returns a *StaleTokenError (errors.Is ErrStaleToken)
// without calling fn. An equal token is accepted: the same holder may write
// twice. Otherwise it calls fn with the transaction, tx, through which fn
// reads what it needs, and a pipeline, pipe, on which fn queues its writes;
// then it sends MULTI, fn's commands, the SET that records token (none
// when the fence key holds token already), and EXEC.
// Redis runs them only if none of the WATCHed keys changed since the WATCH:
// writes are applied, and tokens recorded, in an order where a resource's
// token never decreases. When another writer changed a WATCHed key first,
// nothing was applied and Do tries again, from the WATCH, after a short
// jittered pause: up to WithAttempts times in all (default
// DefaultAttempts), then it returns an error matching ErrContended. So fn
// may run more than once; only the last run's commands are applied, and fn
// must leave nothing behind elsewhere that a run which is not applied would
// make wrong. On success the commands fn queued hold their replies.
//
// keys are the keys fn reads: a write that depends on a value read must
// name its key there, or a concurrent change to it goes unnoticed. Keys fn
// only writes need not be listed. Every key in keys, and every key fn
// writes, must share the fence key's Cluster hash slot; put Tag(resource)
// in them. Do checks keys, on every deployment, before any round trip,
// and returns an error matching ErrInvalid that names the first key
// outside the slot, so that code that runs on one server runs on a
// Cluster. It cannot see the keys of the commands fn queues: a Cluster
// refuses one outside the slot (CROSSSLOT, nothing applied); a single
// server applies it.
//
// Before any round trip, Do returns an error matching ErrInvalid for a nil
// ctx, a nil fn, an unusable Fence (nil, or zero: not from New), a
// resource that is empty, longer than MaxResourceLen bytes, not valid UTF-8
// or holds a NUL byte, a negative token (tokens run from 0 to
// math.MaxInt64), or a key outside the slot. A ctx already done returns
// ctx.Err() (wrapped), also without a round trip.
//
// When fn returns an error, Do returns it as it is; when fn panics, the
// panic continues. Either way nothing fn queued is sent, no token is
// recorded, and the connection is left without a WATCH. So is it when ctx
// ends before EXEC is sent. Errors from Redis come back wrapped with %w.
// When EXEC ran but a command inside it failed (WRONGTYPE, say), Redis
// applied the others and recorded the token, as it never rolls a
// transaction back; Do returns that command's error wrapped, saying so. A
// command refused while queued (a syntax error, a key in another slot)
// aborts the whole transaction (EXECABORT): nothing is applied. An error on
// the EXEC round trip itself (a timeout, a lost connection) leaves unknown
// whether the write was applied.
//
// Do returns within ctx's deadline when the client applies context
// deadlines to its sockets (go-redis's ContextTimeoutEnabled); otherwise a
// hung server holds each round trip for the client's ReadTimeout.
//
// fn must read only through tx and write only through pipe, must not
// write the fence key, and must not execute pipe (Exec, Pipelined, TxPipelined: Do returns an error matching
// ErrInvalid and applies nothing) nor call tx's Watch, Unwatch,
// TxPipelined or Close.
func (f *Fence) Do(ctx context.Context, resource string, token int64, keys []string,
	fn func(ctx context.Context, tx *redis.Tx, pipe redis.Pipeliner) error) error {
	c := Claim{Resource: resource, Token: token}
	if err := f.usable(ctx, c); err != nil {
		return err
	}
	if fn == nil {
		return invalid("nil fn")
	}
	w := write{claims: []Claim{c}, fences: []string{fenceKey(f.cfg.prefix, resource)}, keys: keys, fn: fn}
	if err := sameSlot(w.fences[0], resource, keys); err != nil {
		return err
	}
	return f.run(ctx, &w)
}

// run is Do and DoAll once w is valid: it makes attempts until one is not
// lost to a WATCH race, or f's attempts are spent.
func (f *Fence) run(ctx context.Context, w *write) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("redisfence: %w", cause.Wrap(ctx, err))
	}
	w.watch = make([]string, 0, len(w.fences)+len(w.keys))
	if !f.mutation.skipFenceWatch {
		w.watch = append(w.watch, w.fences...)
	}
	w.watch = append(w.watch, w.keys...)
	for attempt := 1; ; attempt++ {
		lost, err := f.try(ctx, w)
		if !lost {
			return err
		}
		if attempt == f.cfg.attempts {
			return fmt.Errorf("%w: %s, %d attempts: %w", ErrContended, w, attempt, redis.TxFailedErr)
		}
		if err := sleep(ctx, backoff(attempt)); err != nil {
			return fmt.Errorf("%w: %s, %d attempts, then: %w", ErrContended, w, attempt, cause.Wrap(ctx, err))
		}
	}
}

// write is one call of Do or DoAll.
type write struct {
	claims []Claim  // in canonical order
	fences []string // their fence keys
	keys   []string // the caller's
	watch  []string // the fence keys and keys
	fn     func(ctx context.Context, tx *redis.Tx, pipe redis.Pipeliner) error
}

// String names w's resources in errors: `resource "a"`, or
// `resources "a" and 2 more`.
func (w *write) String() string {
	if len(w.claims) == 1 {
		return fmt.Sprintf("resource %q", clip(w.claims[0].Resource))
	}
	return "resources " + fence.Names(w.claims)
}

// try makes one attempt. lost reports that the EXEC found a WATCHed key
// changed, so nothing was applied and another attempt may succeed.
func (f *Fence) try(ctx context.Context, w *write) (lost bool, err error) {
	var (
		ran   bool  // the callback ran: its errors are wrapped already
		fnErr error // fn's, returned as it is
	)
	route := w.watch
	if f.oneTrip {
		route = nil // attempt sends the WATCH itself
	}
	werr := f.client.Watch(ctx, func(tx *redis.Tx) error {
		ran = true
		lost, fnErr, err = f.attempt(ctx, tx, w)
		if fnErr != nil {
			return fnErr
		}
		return err
	}, route...)
	switch {
	case fnErr != nil:
		return false, fnErr
	case ran:
		return lost, cause.Wrap(ctx, err)
	case werr != nil: // the client's own WATCH
		return false, fmt.Errorf("redisfence: %s: watch: %w", w, cause.Wrap(ctx, werr))
	}
	return false, nil
}

// attempt runs one WATCH ... EXEC on tx. It returns fn's error apart, to be
// returned unchanged.
func (f *Fence) attempt(ctx context.Context, tx *redis.Tx, w *write) (lost bool, fnErr, err error) {
	// armed: a WATCH may be in force on tx's connection. Whatever way
	// attempt ends, a panic in fn included, it must not go back to the
	// pool so: a later MULTI of another caller on it would fail for keys it
	// never watched.
	armed := !f.oneTrip && len(w.watch) > 0 // the client's Watch sent it
	defer func() {
		if armed {
			unwatch(ctx, tx)
		}
	}()
	st, err := f.readFences(ctx, tx, w, &armed)
	if err != nil {
		return false, nil, err
	}
	for i, c := range w.claims {
		if c.Token < st[i].highest {
			return false, nil, &StaleTokenError{Resource: c.Resource, Token: c.Token, Highest: st[i].highest}
		}
	}
	if err := ctx.Err(); err != nil {
		return false, nil, fmt.Errorf("redisfence: %w", err)
	}
	q := &queue{Pipeliner: tx.TxPipeline()}
	if err := w.fn(ctx, tx, q); err != nil {
		return false, err, nil
	}
	if q.executed {
		return false, nil, errExecuted
	}
	if err := ctx.Err(); err != nil {
		return false, nil, fmt.Errorf("redisfence: %w", err)
	}
	var sets []*redis.StatusCmd
	for i := range w.claims {
		if set := f.record(ctx, q.Pipeliner, w.fences[i], w.claims[i].Token, st[i]); set != nil {
			sets = append(sets, set)
		}
	}
	_, err = q.Pipeliner.Exec(ctx)
	if err == nil || errors.Is(err, redis.TxFailedErr) || redis.IsExecAbortError(err) {
		armed = false // EXEC ran, or was refused: either way the WATCH is over
	}
	switch {
	case err == nil:
		return false, nil, nil
	case errors.Is(err, redis.TxFailedErr):
		return true, nil, nil
	case !slices.ContainsFunc(sets, func(s *redis.StatusCmd) bool { return s.Err() != nil }):
		// EXEC ran, and a command of fn's failed inside it
		return false, nil, fmt.Errorf("redisfence: %s: %s recorded and the other commands applied, but one failed (Redis does not roll back): %w",
			w, w.tokens(), err)
	}
	return false, nil, fmt.Errorf("redisfence: %s: exec: %w", w, err)
}

// fenceState is the fence key as Do read it, after the WATCH: any change
// to it since then makes the EXEC fail.
type fenceState struct {
	highest int64         // the token it holds, or -1 when there is none
	pttl    time.Duration // its TTL left; -1: no expiry, -2: no key
	read    time.Time     // when it was read, for the TTL left at EXEC
}

// record queues, last on pipe, the SET that records w's token, or nothing
// when the key holds the token already and keeps it long enough: every
// write to the key breaks the WATCH of every other writer of the resource,
// and writers sharing a token would make each other retry. It never
// shortens the key's life. The queued command, or nil.
func (f *Fence) record(ctx context.Context, pipe redis.Pipeliner, key string, token int64, st fenceState) *redis.StatusCmd {
	ttl := f.cfg.ttl
	if st.highest == token {
		left := st.pttl - time.Since(st.read)
		// With a TTL: a key rewritten gets 1.5 × ttl and is rewritten again
		// below 1.25 × ttl, so it keeps at least ttl after the last accepted
		// write, with ttl/4 for the time from here to the EXEC.
		if st.pttl == -1 || ttl > 0 && left >= ttl+ttl/4 {
			return nil
		}
	}
	if ttl == 0 || st.pttl == -1 { // a key without expiry keeps none
		return pipe.Set(ctx, key, token, 0)
	}
	return pipe.Set(ctx, key, token, max(ttl+ttl/2, st.pttl))
}

// readFences WATCHes (on a *redis.Client, in one round trip with the
// reads) and reads w's fence keys, one state per claim.
func (f *Fence) readFences(ctx context.Context, tx *redis.Tx, w *write, armed *bool) ([]fenceState, error) {
	var (
		watch *redis.StatusCmd
		get   = make([]*redis.StringCmd, len(w.fences))
		pttl  = make([]*redis.DurationCmd, len(w.fences))
	)
	if f.oneTrip {
		*armed = len(w.watch) > 0
	}
	_, _ = tx.Pipelined(ctx, func(p redis.Pipeliner) error {
		if f.oneTrip && *armed {
			args := make([]any, 1+len(w.watch))
			args[0] = "watch"
			for i, k := range w.watch {
				args[1+i] = k
			}
			watch = redis.NewStatusCmd(ctx, args...)
			_ = p.Process(ctx, watch)
		}
		for i, key := range w.fences {
			get[i], pttl[i] = p.Get(ctx, key), p.PTTL(ctx, key)
		}
		return nil
	})
	if watch != nil && watch.Err() != nil {
		return nil, fmt.Errorf("redisfence: %s: watch: %w", w, watch.Err())
	}
	st := make([]fenceState, len(w.fences))
	for i := range w.fences {
		var err error
		if st[i], err = fenceOf(w.claims[i].Resource, w.fences[i], get[i], pttl[i]); err != nil {
			return nil, err
		}
	}
	return st, nil
}

// fenceOf is the state of resource's fence key, key, from the replies
// to its GET and PTTL.
func fenceOf(resource, key string, get *redis.StringCmd, pttl *redis.DurationCmd) (fenceState, error) {
	st := fenceState{highest: -1, read: time.Now()}
	v, err := get.Result()
	switch {
	case errors.Is(err, redis.Nil):
		st.pttl = -2
		return st, nil // no fence yet: every token is accepted
	case err != nil:
		return st, fmt.Errorf("redisfence: resource %q: read fence: %w", clip(resource), err)
	}
	st.highest, err = strconv.ParseInt(v, 10, 64)
	if err != nil || st.highest < 0 {
		return st, fmt.Errorf("redisfence: resource %q: fence key %q holds %q, which is not a token", clip(resource), clip(key), clip(v))
	}
	if st.pttl, err = pttl.Result(); err != nil {
		return st, fmt.Errorf("redisfence: resource %q: read fence: %w", clip(resource), err)
	}
	return st, nil
}

// cleanupTimeout bounds an UNWATCH sent after the caller's ctx may have
// ended: long enough for a healthy server, short enough that a dead one
// does not hold the caller. After a network error go-redis has already
// discarded the connection, and the UNWATCH fails at once.
const cleanupTimeout = 5 * time.Second

func unwatch(ctx context.Context, tx *redis.Tx) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
	defer cancel()
	_ = tx.Unwatch(ctx).Err()
}

// The pause after a lost WATCH race grows from backoffMin, doubling, to
// backoffMax, and is drawn from its upper half, so that the writers that
// lost one race do not all come back together.
const (
	backoffMin = 200 * time.Microsecond
	backoffMax = 20 * time.Millisecond
)

func backoff(attempt int) time.Duration {
	d := backoffMin << min(attempt-1, 7)
	d = min(d, backoffMax)
	return d/2 + rand.N(d/2+1)
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
