package redisinspect

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redfence/redfence/mutex/backend"
	"github.com/redfence/redfence/redis/internal/redisproto"
)

// Inspection limits: a key's queue and audit stream can be long; a view
// shows their heads.
const (
	inspectWaiters = 100
	inspectForced  = 10
)

// Inspect returns key's state as the servers hold it: owner, token, lease,
// waiters and the latest forced releases, in one round trip per server, all
// servers at once. It changes nothing, and reads with a read-only script
// (EVALSHA_RO where the server has it), which a CLIENT PAUSE WRITE does not
// hold. On Redlock the state is the quorum's, with each node's in Nodes;
// when too few nodes answer, or those that do cannot tell held from free,
// the error matches backend.ErrUnavailable and the KeyState still carries
// Nodes.
func (in *Inspector) Inspect(ctx context.Context, key string) (backend.KeyState, error) {
	if err := in.check(ctx); err != nil {
		return backend.KeyState{}, err
	}
	_, name, err := in.split(key)
	if err != nil {
		return backend.KeyState{}, err
	}
	call := redisproto.Call{
		Keys: []string{name, redisproto.QueueOf(name), redisproto.AuditOf(name)},
		Args: []any{inspectWaiters, inspectForced},
	}
	views, errs := eachServer(in, ctx, func(ctx context.Context, _ int, c redis.UniversalClient) (nodeView, error) {
		cmds, err := redisproto.RunScriptsRO(ctx, c, redisproto.InspectScript, []redisproto.Call{call})
		if err != nil {
			return nodeView{}, err
		}
		return readView(cmds[0])
	})
	for i, err := range errs {
		views[i].err = err
	}
	return in.viewOf(key, name, views)
}

// viewOf is the state of key (Redis key name) in views, one per server:
// the server's own, or for Redlock the quorum's.
func (in *Inspector) viewOf(key, name string, views []nodeView) (backend.KeyState, error) {
	if !in.redlock() {
		if err := views[0].err; err != nil {
			return backend.KeyState{}, unavailable(err)
		}
		return views[0].state(key, name), nil
	}
	return in.quorumView(key, name, views)
}

// nodeView is one server's answer for one key.
type nodeView struct {
	now     time.Time
	value   string
	waiters []backend.Waiter
	forced  []backend.ForceRecord
	err     error
}

// readView reads inspect.lua's reply.
func readView(cmd *redis.Cmd) (nodeView, error) {
	r, err := cmd.Slice()
	if err != nil {
		return nodeView{}, err
	}
	if len(r) != 6 {
		return nodeView{}, fmt.Errorf("mutex: inspect: unexpected reply of %d parts", len(r))
	}
	sec, _ := strconv.ParseInt(fmt.Sprint(r[0]), 10, 64)
	us, _ := strconv.ParseInt(fmt.Sprint(r[1]), 10, 64)
	v := nodeView{now: time.Unix(sec, us*1000)}
	v.value, _ = r[2].(string)
	if q, ok := r[4].([]any); ok {
		for i := 0; i+1 < len(q); i += 2 {
			id, _ := q[i].(string)
			since := redisproto.MicroTime(fmt.Sprint(q[i+1]))
			v.waiters = append(v.waiters, backend.Waiter{ID: id, Since: since})
		}
	}
	if a, ok := r[5].([]any); ok {
		for _, e := range a {
			v.forced = append(v.forced, readForced(e))
		}
	}
	return v, nil
}

// readForced reads one XREVRANGE entry of the audit stream.
func readForced(e any) backend.ForceRecord {
	var f backend.ForceRecord
	parts, _ := e.([]any)
	if len(parts) != 2 {
		return f
	}
	f.ID, _ = parts[0].(string)
	if ms, err := strconv.ParseInt(strings.SplitN(f.ID, "-", 2)[0], 10, 64); err == nil {
		f.At = time.UnixMilli(ms)
	}
	fields, _ := parts[1].([]any)
	for i := 0; i+1 < len(fields); i += 2 {
		k, _ := fields[i].(string)
		val, _ := fields[i+1].(string)
		switch k {
		case "by":
			f.By = val
		case "reason":
			f.Reason = val
		case "token":
			f.Token, _ = strconv.ParseInt(val, 10, 64)
		case "floor":
			f.Floor, _ = strconv.ParseInt(val, 10, 64)
		case "owner":
			f.Owner = val
		case "count":
			f.Count, _ = strconv.Atoi(val)
		}
	}
	return f
}

// state reads one server's view of key (Redis key name). A free key keeps
// only its token (the next exceeds it), its queue unless it was released,
// and its audit; Owner is "" then.
func (v *nodeView) state(key, name string) backend.KeyState {
	st := backend.KeyState{Key: key, Name: name, Now: v.now, Waiters: v.waiters, Forced: v.forced}
	val, ok := redisproto.ParseValue(v.value)
	if !ok {
		return st // none, or unreadable: free, as acquire takes it
	}
	st.Token = val.Token
	if val.Released {
		st.Waiters = nil
		return st
	}
	lease := val.From.Add(val.Lease).Sub(v.now)
	if lease <= 0 || val.From.IsZero() {
		return st // the lease ran out
	}
	st.Owner, st.Count, st.Waited = val.Owner, val.Count, val.Waited
	st.RenewedAt, st.Lease = val.From, lease
	if st.Count == 0 {
		return st // reserved for a waiter: no acquisition yet
	}
	st.AcquiredAt = val.Issued
	if st.AcquiredAt.After(val.From) {
		st.AcquiredAt = time.Time{} // a raised (Redlock) or floored token
	}
	return st
}

// taken reports whether st is held or reserved: not free.
func taken(st backend.KeyState) bool { return st.Owner != "" && st.Lease > 0 }
