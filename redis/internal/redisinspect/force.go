package redisinspect

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redfence/redfence/mutex/backend"
	"github.com/redfence/redfence/redis/internal/redisproto"
)

// auditTTL is how long a key's audit stream of forced releases outlives
// the last one.
const auditTTL = 30 * 24 * time.Hour

// ForceRelease frees key behind its holder's back on every server that
// holds it under f.Token (0: whoever holds it), with force.lua: the key
// keeps a token floor one above the holder's token, an audit entry goes to
// the stream beside it, and its watchers are woken. On Redlock, f.Token 0
// first inspects the key and ends the quorum's holder only: nodes outside
// the quorum may hold a stale minority grant.
//
// When the outcome is unknown where the holder could keep the lock (one
// deployment's server, or a quorum of Redlock's nodes did not answer), the
// error matches backend.ErrUnavailable, with what the others reported. A
// key held under another token returns Forced{Token: that token}; a free
// or reserved key Forced{}, both with a nil error.
func (in *Inspector) ForceRelease(ctx context.Context, key string, f backend.Force) (backend.Forced, error) {
	if err := in.check(ctx); err != nil {
		return backend.Forced{}, err
	}
	user, name, err := in.split(key)
	if err != nil {
		return backend.Forced{}, err
	}
	if f.Token < 0 {
		return backend.Forced{}, invalid("negative token %d", f.Token)
	}
	if f.Token == 0 && in.redlock() {
		st, err := in.Inspect(ctx, key)
		if err != nil {
			return backend.Forced{}, err
		}
		if !taken(st) || st.Count == 0 {
			return backend.Forced{}, nil // no quorum holds it: nobody to end
		}
		f.Token = st.Token
	}
	want := ""
	if f.Token > 0 {
		want = strconv.FormatInt(f.Token, 10)
	}
	keys := []string{name, redisproto.AuditOf(name)}
	args := []any{want, f.By, f.Reason, in.cfg.Publish, auditTTL.Milliseconds(), user}
	replies, errs := eachServer(in, ctx, func(ctx context.Context, _ int, c redis.UniversalClient) ([]any, error) {
		return redisproto.ForceScript.Run(ctx, c, keys, args...).Slice()
	})
	res, other, failed := tallyForced(replies, errs)
	// The holder keeps the lock only where the outcome is unknown: on one
	// deployment, that server; on Redlock, a quorum of unanswered nodes.
	if len(failed) > 0 && (!in.redlock() || len(failed) >= in.cfg.Quorum) {
		return res, unavailable(fmt.Errorf("forced release of %q: %d of %d servers did not answer, the holder may keep the lock: %w",
			user, len(failed), len(errs), errors.Join(failed...)))
	}
	if res.Released || len(other) == 0 {
		return res, nil
	}
	return backend.Forced{Token: other[0]}, nil
}

// tallyForced reads force.lua's replies, one per server: what the servers
// that released it report, the tokens others hold it under, and the errors
// of those that did not answer.
func tallyForced(replies [][]any, errs []error) (res backend.Forced, other []int64, failed []error) {
	for i, r := range replies {
		if errs[i] != nil {
			failed = append(failed, errs[i])
			continue
		}
		if len(r) == 0 {
			continue
		}
		status, _ := r[0].(int64)
		switch {
		case status == 1 && len(r) == 5:
			res.Released = true
			res.Servers++
			tok, _ := strconv.ParseInt(fmt.Sprint(r[1]), 10, 64)
			floor, _ := strconv.ParseInt(fmt.Sprint(r[2]), 10, 64)
			res.Token = max(res.Token, tok)
			res.Floor = max(res.Floor, floor)
			res.Owner, _ = r[3].(string)
			res.Count, _ = strconv.Atoi(fmt.Sprint(r[4]))
		case status == -1 && len(r) == 2:
			tok, _ := strconv.ParseInt(fmt.Sprint(r[1]), 10, 64)
			other = append(other, tok)
		}
	}
	return res, other, failed
}
