package redisinspect

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redfence/redfence/mutex/backend"
	"github.com/redfence/redfence/redis/internal/redisproto"
)

var _ backend.HoldLister = (*Inspector)(nil)

// ListHolds is List that also finds the semaphores and read-write locks
// kept beside the locks (backend.HoldLister). Their keys are hashes and
// sorted sets, so its SCANs take every type; each kind found costs the
// page one more round trip, a pipelined read of them all. A key of another
// type under one of these names is not one of them, and is passed over.
// Redlock keeps neither: there ListHolds is List.
func (in *Inspector) ListHolds(ctx context.Context, r backend.ListRequest) (backend.ListPage, error) {
	return in.list(ctx, r, in != nil && !in.redlock())
}

// keyKind is what a key a SCAN found belongs to.
type keyKind int

const (
	lockKind keyKind = iota
	semaphoreKind
	rwKind
)

// holdSuffixes end the keys a listing finds semaphores and read-write locks
// by: of each, the keys that exist while it has anything to show (its
// holders, its meta hash, its waiting writers; redisproto.SemaphoreKeys and
// RWKeys), so that it is found whichever its SCAN reaches first.
var holdSuffixes = func() []struct {
	suffix string
	kind   keyKind
} {
	sem, rw := redisproto.SemaphoreKeys(""), redisproto.RWKeys("")
	return []struct {
		suffix string
		kind   keyKind
	}{{sem[0], semaphoreKind}, {sem[2], semaphoreKind}, {rw[0], rwKind}, {rw[2], rwKind}, {rw[3], rwKind}}
}()

// kindOf reads a Redis key name under prefix: a lock key, or with holds one
// of a semaphore's or a read-write lock's keys, and the user key and lock
// key name it belongs to; ok is false for any other key.
func kindOf(prefix, name string, holds bool) (key, lockName string, kind keyKind, ok bool) {
	if key, ok := redisproto.KeyOf(prefix, name); ok {
		return key, name, lockKind, true
	}
	if !holds {
		return "", "", 0, false
	}
	for _, s := range holdSuffixes {
		if base, cut := strings.CutSuffix(name, s.suffix); cut {
			if key, ok := redisproto.KeyOf(prefix, base); ok {
				return key, base, s.kind, true
			}
		}
	}
	return "", "", 0, false
}

// readHolds reads the semaphores and read-write locks a page found (their
// lock key names in found), one pipelined round trip per kind, and adds
// them to page. One deployment only: Redlock keeps neither.
func (in *Inspector) readHolds(ctx context.Context, page *backend.ListPage, sems, rws []foundKey) error {
	semCalls := make([]redisproto.Call, len(sems))
	for i, f := range sems {
		semCalls[i] = redisproto.Call{Keys: redisproto.SemaphoreKeys(f.name)}
	}
	rwCalls := make([]redisproto.Call, len(rws))
	for i, f := range rws {
		rwCalls[i] = redisproto.Call{Keys: redisproto.RWKeys(f.name)}
	}
	type replies struct{ sem, rw []*redis.Cmd }
	got, errs := eachServer(in, ctx, func(ctx context.Context, _ int, c redis.UniversalClient) (replies, error) {
		var r replies
		var err error
		if len(semCalls) > 0 {
			if r.sem, err = readScripts(ctx, c, redisproto.SemInspectScript, semCalls); err != nil {
				return r, err
			}
		}
		if len(rwCalls) > 0 {
			r.rw, err = readScripts(ctx, c, redisproto.RWInspectScript, rwCalls)
		}
		return r, err
	})
	for _, calls := range [][]redisproto.Call{semCalls, rwCalls} {
		if len(calls) > 0 {
			page.RoundTrips++
		}
	}
	if errs[0] != nil {
		return unavailable(errs[0])
	}
	for i, cmd := range got[0].sem {
		reply, err := cmd.Slice()
		if wrongType(err) {
			continue
		}
		st, err := readSemaphore(reply, err)
		if err != nil {
			return fmt.Errorf("read semaphore %q: %w", sems[i].key, err)
		}
		page.Semaphores = append(page.Semaphores, backend.SemaphoreKey{Key: sems[i].key, SemaphoreState: st})
	}
	for i, cmd := range got[0].rw {
		reply, err := cmd.Slice()
		if wrongType(err) {
			continue
		}
		st, err := readRW(reply, err)
		if err != nil {
			return fmt.Errorf("read read-write lock %q: %w", rws[i].key, err)
		}
		page.RWLocks = append(page.RWLocks, backend.RWKey{Key: rws[i].key, RWState: st})
	}
	return nil
}

func readSemaphore(reply []any, err error) (backend.SemaphoreState, error) {
	if err != nil {
		return backend.SemaphoreState{}, unavailable(err)
	}
	return ParseSemaphore(reply)
}

func readRW(reply []any, err error) (backend.RWState, error) {
	if err != nil {
		return backend.RWState{}, unavailable(err)
	}
	return ParseRW(reply)
}

// readScripts is redisproto.RunScriptsRO for a listing's reads: a key of
// another type under one of the names read (WRONGTYPE) fails its own
// command, not the round trip.
func readScripts(ctx context.Context, c redis.UniversalClient, s *redis.Script, calls []redisproto.Call) ([]*redis.Cmd, error) {
	cmds, err := redisproto.RunScriptsRO(ctx, c, s, calls)
	if err != nil && !slices.ContainsFunc(cmds, func(cmd *redis.Cmd) bool { return cmd.Err() != nil && !wrongType(cmd.Err()) }) {
		err = nil
	}
	return cmds, err
}

// wrongType reports whether err is the server's WRONGTYPE: the key read is
// not of the type the script reads it as. Within a script the error keeps
// its code, after a prefix on servers older than Redis 7.
func wrongType(err error) bool {
	var rerr redis.Error
	return errors.As(err, &rerr) && strings.Contains(rerr.Error(), "WRONGTYPE")
}

// What ParseSemaphore and ParseRW return for a reply their script does not
// give.
var (
	errSemaphoreReply = errors.New("mutex: unexpected reply from a semaphore script")
	errRWReply        = errors.New("mutex: unexpected reply from a read-write lock script")
)

// ParseSemaphore reads sem_inspect.lua's reply, {limit, holder, token, µs
// left, ...}: what the Redis driver's InspectSemaphore and a listing show.
func ParseSemaphore(r []any) (backend.SemaphoreState, error) {
	var st backend.SemaphoreState
	if len(r)%3 != 1 {
		return st, errSemaphoreReply
	}
	if s, _ := r[0].(string); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil {
			return st, errSemaphoreReply
		}
		st.Limit = n
	}
	for i := 1; i < len(r); i += 3 {
		owner, _ := r[i].(string)
		ts, _ := r[i+1].(string)
		us, _ := r[i+2].(string)
		tok, err1 := strconv.ParseInt(ts, 10, 64)
		left, err2 := strconv.ParseInt(us, 10, 64)
		if err := errors.Join(err1, err2); err != nil {
			return st, fmt.Errorf("%w: %w", errSemaphoreReply, err)
		}
		st.Holders = append(st.Holders, backend.PermitHolder{Owner: owner, Token: tok, Left: time.Duration(left) * time.Microsecond})
	}
	return st, nil
}

// ParseRW reads rw_inspect.lua's reply, {last token, waiting writers,
// writer, µs left, reader, token, µs left, ...}: what the Redis driver's
// InspectRW and a listing show.
func ParseRW(r []any) (backend.RWState, error) {
	var st backend.RWState
	if len(r) < 4 || len(r)%3 != 1 {
		return st, errRWReply
	}
	num := func(v any) (int64, error) {
		if s, _ := v.(string); s != "" {
			return strconv.ParseInt(s, 10, 64)
		}
		return 0, nil
	}
	waiting, _ := r[1].(int64)
	st.Waiting = int(waiting)
	c, err1 := num(r[0])
	left, err2 := num(r[3])
	st.LastWrite = c
	if w, _ := r[2].(string); w != "" {
		st.Writer = &backend.RWHolder{Owner: w, Token: c, Left: time.Duration(left) * time.Microsecond}
	}
	errs := []error{err1, err2}
	for i := 4; i < len(r); i += 3 {
		owner, _ := r[i].(string)
		tok, err1 := num(r[i+1])
		left, err2 := num(r[i+2])
		errs = append(errs, err1, err2)
		st.Readers = append(st.Readers, backend.RWHolder{Owner: owner, Token: tok, Left: time.Duration(left) * time.Microsecond})
	}
	if err := errors.Join(errs...); err != nil {
		return backend.RWState{}, fmt.Errorf("%w: %w", errRWReply, err)
	}
	return st, nil
}
