package admin

import (
	"context"
	"errors"
	"fmt"

	"github.com/redfence/redfence/internal/glob"
	"github.com/redfence/redfence/internal/hostlink"
	"github.com/redfence/redfence/mutex"
	"github.com/redfence/redfence/mutex/backend"
)

// Inspection over the backend's backend.Inspector: the public LockInfo,
// Page and ForceResult from its KeyStates.

// infoOf reads a backend's KeyState as a LockInfo of key.
func infoOf(key string, st backend.KeyState) LockInfo {
	in := LockInfo{Key: key, Name: st.Key, Token: st.Token, ServerTime: st.Now}
	if st.Name != "" {
		in.Name = st.Name
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
	for _, n := range st.Nodes {
		in.Nodes = append(in.Nodes, NodeInfo{Node: n.Node, Addr: n.Addr, Info: infoOf(key, n.State), Err: n.Err})
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

// list is List once o is checked: one page from the backend, its keys
// matched against o.Match again (a backend may only narrow its reads by
// it).
func (a *Admin) list(ctx context.Context, o ListOptions) (Page, error) {
	req := backend.ListRequest{Cursor: o.Cursor, Match: o.Match, Count: o.Count, Scans: o.Scans, Limit: o.Limit}
	var r backend.ListPage
	var err error
	if a.holds != nil {
		r, err = a.holds.ListHolds(ctx, req)
	} else {
		r, err = a.in.List(ctx, req)
	}
	switch {
	case errors.Is(err, backend.ErrBadCursor):
		return Page{RoundTrips: r.RoundTrips}, invalid("cursor %q is not one List returned: %v", o.Cursor, err)
	case err != nil:
		return Page{RoundTrips: r.RoundTrips}, unavailable(err)
	}
	page := Page{Cursor: r.Cursor, RoundTrips: r.RoundTrips, Skipped: r.Skipped}
	for _, st := range r.Keys {
		key := st.Key
		if !glob.Match(o.Match, key) {
			continue
		}
		in := infoOf(key, st)
		in.Forced = nil // Inspect shows them
		if in.State != Free || o.Free {
			page.Locks = append(page.Locks, in)
		}
	}
	if a.holds == nil {
		return page, nil
	}
	page.HoldsListed = true
	for _, k := range r.Semaphores {
		if s := semaphoreOf(k.Key, k.SemaphoreState); glob.Match(o.Match, k.Key) && (s.Held() || o.Free) {
			page.Semaphores = append(page.Semaphores, s)
		}
	}
	for _, k := range r.RWLocks {
		if rw := rwLockOf(k.Key, k.RWState); glob.Match(o.Match, k.Key) && (rw.Held() || rw.Waiting > 0 || o.Free) {
			page.RWLocks = append(page.RWLocks, rw)
		}
	}
	return page, nil
}

// force is ForceRelease once o is checked and By filled in.
func (a *Admin) force(ctx context.Context, key string, o ForceOptions) (ForceResult, error) {
	f, err := a.in.ForceRelease(ctx, key, backend.Force{Token: o.Token, By: o.By, Reason: o.Reason})
	res := ForceResult{Key: key}
	if f.Released { // also when the outcome on other servers is unknown
		res.Token, res.Floor, res.Owner, res.Count = f.Token, f.Floor, f.Owner, f.Count
		res.Released = max(f.Servers, 1)
		res.Info, _ = parseOwner(f.Owner)
		hostlink.Forced(a.l, key, res.Token, o.Reason)
	}
	switch {
	case err != nil && errors.Is(err, mutex.ErrUnavailable):
		return res, err // says what the servers did
	case err != nil:
		return res, unavailable(fmt.Errorf("forced release of %q: the holder may keep the lock: %w", key, err))
	case !f.Released && f.Token > 0 && o.Token > 0:
		return res, fmt.Errorf("%w: %q is held under token %d, not %d", mutex.ErrNotHeld, key, f.Token, o.Token)
	case !f.Released:
		return res, fmt.Errorf("%w: nobody holds %q", mutex.ErrNotHeld, key)
	}
	return res, nil
}
