package mutex

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/redfence/redfence/mutex/backend"
)

// Inspection over a backend.Inspector (NewWithBackend): the same LockInfo,
// Page and ForceResult as over Redis, from the backend's plain KeyStates.
// Glob matching, the Locker's defaults and telemetry stay here.

// inspectVia is Inspect over l.insp.
func (l *Locker) inspectVia(ctx context.Context, key string) (LockInfo, error) {
	st, err := l.insp.Inspect(ctx, l.be.name(key))
	if err != nil {
		return LockInfo{}, unavailable(err)
	}
	return infoOf(key, st), nil
}

// infoOf reads a backend's KeyState as a LockInfo of key.
func infoOf(key string, st backend.KeyState) LockInfo {
	in := LockInfo{
		Key: key, Name: st.Key, Token: st.Token, ServerTime: st.Now,
	}
	for _, w := range st.Waiters {
		info, _ := parseOwner(w.ID)
		v := Waiter{Locker: w.ID, Info: info, Since: w.Since}
		if !w.Since.IsZero() && !st.Now.IsZero() {
			v.Waited = max(st.Now.Sub(w.Since), 0)
		}
		in.Waiters = append(in.Waiters, v)
	}
	for _, f := range st.Forced {
		info, _ := parseOwner(f.Owner)
		in.Forced = append(in.Forced, ForcedRelease{
			ID: f.ID, At: f.At, By: f.By, Reason: f.Reason, Token: f.Token,
			Floor: f.Floor, Owner: f.Owner, Info: info, Count: f.Count,
		})
	}
	if st.Owner == "" || st.Lease <= 0 {
		return in // free: the token stays, the next exceeds it
	}
	in.Owner, in.Count, in.Waited = st.Owner, st.Count, st.Waited
	in.Info, _ = parseOwner(st.Owner)
	in.RenewedAt, in.Lease = st.RenewedAt, st.Lease
	in.State = Reserved
	if st.Count > 0 {
		in.State, in.AcquiredAt = Held, st.AcquiredAt
	}
	return in
}

// listVia is List over l.insp: up to o.Scans pages of o.Count keys each
// from the backend, until o.Limit lock keys matched; each page is one
// round trip.
func (l *Locker) listVia(ctx context.Context, o ListOptions) (Page, error) {
	var page Page
	cursor, matched := o.Cursor, 0
	for range o.Scans {
		states, next, err := l.insp.List(ctx, l.cfg.prefix, cursor, o.Count)
		page.RoundTrips++
		switch {
		case errors.Is(err, backend.ErrBadCursor):
			return Page{RoundTrips: page.RoundTrips}, invalid("cursor %q is not one List returned: %v", cursor, err)
		case err != nil:
			return Page{RoundTrips: page.RoundTrips}, unavailable(err)
		}
		for _, st := range states {
			key, ok := strings.CutPrefix(st.Key, l.cfg.prefix)
			if !ok || !matchGlob(o.Match, key) {
				continue
			}
			matched++
			in := infoOf(key, st)
			in.Forced = nil // Inspect shows them
			if in.State != Free || o.Free {
				page.Locks = append(page.Locks, in)
			}
		}
		cursor = next
		if cursor == "" || o.Limit > 0 && matched >= o.Limit {
			break
		}
	}
	page.Cursor = cursor
	return page, nil
}

// forceVia is ForceRelease over l.insp, o checked and By filled in.
func (l *Locker) forceVia(ctx context.Context, key string, o ForceOptions) (ForceResult, error) {
	f, err := l.insp.ForceRelease(ctx, l.be.name(key), backend.Force{Token: o.Token, By: o.By, Reason: o.Reason})
	res := ForceResult{Key: key}
	switch {
	case err != nil:
		return res, unavailable(fmt.Errorf("forced release of %q: the holder may keep the lock: %w", key, err))
	case !f.Released && f.Token > 0 && o.Token > 0:
		return res, fmt.Errorf("%w: %q is held under token %d, not %d", ErrNotHeld, key, f.Token, o.Token)
	case !f.Released:
		return res, fmt.Errorf("%w: nobody holds %q", ErrNotHeld, key)
	}
	res.Token, res.Floor, res.Owner, res.Count, res.Released = f.Token, f.Floor, f.Owner, f.Count, 1
	res.Info, _ = parseOwner(f.Owner)
	l.tel.forced(key, res.Token, o.Reason)
	return res, nil
}
