package admintest

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redfence/redfence/mutex/backend"
)

// memory is an in-memory backend.Backend outside package mutex, as mutex's
// backend_contract_test.go has one: inspection, listing and forced release
// run through backend.Inspector alone, with no Redis. It keeps package
// backend's contract, wakes its watchers (backend.Watcher) and shows its
// locks (inspecting); plain hides all but the Backend.
type memory struct {
	mu       sync.Mutex
	locks    map[string]*memLock
	last     int64 // the last token issued
	watchers map[string]map[*func()]bool
	audit    map[string][]backend.ForceRecord // forced releases by key, latest first
}

type memLock struct {
	owner string
	token int64
	count int64
	until time.Time
	since time.Time // when token was issued
}

func newMemory() *memory {
	return &memory{locks: map[string]*memLock{}, watchers: map[string]map[*func()]bool{}, audit: map[string][]backend.ForceRecord{}}
}

var (
	_ backend.Backend   = (*memory)(nil)
	_ backend.Watcher   = (*memory)(nil)
	_ backend.Inspector = (*memory)(nil)
)

// held returns the live lock on key, under m.mu.
func (m *memory) held(key string) *memLock {
	k := m.locks[key]
	if k == nil || !time.Now().Before(k.until) {
		return nil
	}
	return k
}

func (m *memory) holds(l backend.Lease) *memLock {
	if k := m.held(l.Key); k != nil && k.owner == l.Owner && k.token == l.Token {
		return k
	}
	return nil
}

// free deletes key and wakes its watchers, under m.mu.
func (m *memory) free(key string) {
	delete(m.locks, key)
	for wake := range m.watchers[key] {
		(*wake)()
	}
}

func (m *memory) Acquire(_ context.Context, a backend.Attempt) (backend.Grant, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if k := m.held(a.Key); k != nil {
		if k.owner != a.Owner {
			return backend.Grant{Status: backend.Held, Remaining: time.Until(k.until)}, nil
		}
		k.count++
		k.until = time.Now().Add(a.TTL)
		return backend.Grant{Status: backend.Reentered, Token: k.token}, nil
	}
	m.last++
	now := time.Now()
	m.locks[a.Key] = &memLock{owner: a.Owner, token: m.last, count: 1, until: now.Add(a.TTL), since: now}
	return backend.Grant{Status: backend.Acquired, Token: m.last}, nil
}

func (m *memory) Release(_ context.Context, l backend.Lease) (int64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	k := m.holds(l)
	if k == nil {
		return -1, nil
	}
	if k.count--; k.count == 0 {
		m.free(l.Key)
	}
	return k.count, nil
}

func (m *memory) Extend(_ context.Context, leases []backend.Lease) ([]backend.Renewal, error) {
	sent := time.Now()
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]backend.Renewal, len(leases))
	for i, l := range leases {
		out[i] = backend.Gone
		if k := m.holds(l); k != nil {
			k.until = sent.Add(l.TTL)
			out[i] = backend.Renewed
		}
	}
	return out, nil
}

func (m *memory) TTL(_ context.Context, l backend.Lease) (time.Duration, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if k := m.holds(l); k != nil {
		return time.Until(k.until), nil
	}
	return -1, nil
}

func (m *memory) Abandon(_ context.Context, key, owner string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if k := m.held(key); k != nil && k.owner == owner {
		m.free(key)
	}
	return nil
}

func (m *memory) Watch(key string, wake func()) (<-chan struct{}, func()) {
	m.mu.Lock()
	defer m.mu.Unlock()
	p := &wake
	if m.watchers[key] == nil {
		m.watchers[key] = map[*func()]bool{}
	}
	m.watchers[key][p] = true
	return nil, func() {
		m.mu.Lock()
		defer m.mu.Unlock()
		delete(m.watchers[key], p)
	}
}

// watched counts the watches of every key.
func (m *memory) watched() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := 0
	for _, ws := range m.watchers {
		n += len(ws)
	}
	return n
}

// state is key's KeyState, under m.mu.
func (m *memory) state(key string, now time.Time) backend.KeyState {
	st := backend.KeyState{Key: key, Now: now, Forced: m.audit[key]}
	k := m.locks[key]
	if k == nil {
		return st
	}
	st.Token = k.token
	if !now.Before(k.until) {
		return st // the lease ran out: free, the token remembered
	}
	st.Owner, st.Count, st.AcquiredAt, st.Lease = k.owner, int(k.count), k.since, k.until.Sub(now)
	return st
}

func (m *memory) Inspect(_ context.Context, key string) (backend.KeyState, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.state(key, time.Now()), nil
}

// List makes up to r.Scans "round trips" of r.Count keys each, in key
// order, until r.Limit keys were found; a cursor is "after:" and the last
// key returned. It ignores r.Match, which is a hint: the caller filters.
func (m *memory) List(_ context.Context, r backend.ListRequest) (backend.ListPage, error) {
	after, ok := strings.CutPrefix(r.Cursor, "after:")
	if r.Cursor != "" && !ok {
		return backend.ListPage{RoundTrips: 1}, fmt.Errorf("%w: %q", backend.ErrBadCursor, r.Cursor)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	var keys []string
	for k := range m.locks {
		if k > after {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	var page backend.ListPage
	now := time.Now()
	for page.RoundTrips < r.Scans && len(keys) > 0 && (r.Limit == 0 || len(page.Keys) < r.Limit) {
		page.RoundTrips++
		n := min(r.Count, len(keys))
		for _, k := range keys[:n] {
			page.Keys = append(page.Keys, m.state(k, now))
		}
		page.Cursor, keys = "after:"+keys[n-1], keys[n:]
	}
	if len(keys) == 0 {
		page.Cursor = ""
	}
	page.RoundTrips = max(page.RoundTrips, 1)
	return page, nil
}

func (m *memory) ForceRelease(_ context.Context, key string, f backend.Force) (backend.Forced, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	k := m.held(key)
	switch {
	case k == nil:
		return backend.Forced{}, nil
	case f.Token != 0 && f.Token != k.token:
		return backend.Forced{Token: k.token}, nil
	}
	floor := k.token + 1
	m.last = max(m.last, floor)
	rec := backend.ForceRecord{
		ID: strconv.Itoa(len(m.audit[key]) + 1), At: time.Now(), By: f.By, Reason: f.Reason,
		Token: k.token, Floor: floor, Owner: k.owner, Count: int(k.count),
	}
	m.audit[key] = append([]backend.ForceRecord{rec}, m.audit[key]...)
	m.free(key)
	return backend.Forced{Released: true, Token: k.token, Floor: floor, Owner: k.owner, Count: int(k.count), Servers: 1}, nil
}

// plain is a memory that is a Backend and nothing else: no Inspector.
type plain struct{ m *memory }

func (p plain) Acquire(ctx context.Context, a backend.Attempt) (backend.Grant, error) {
	return p.m.Acquire(ctx, a)
}
func (p plain) Release(ctx context.Context, l backend.Lease) (int64, error) {
	return p.m.Release(ctx, l)
}
func (p plain) Extend(ctx context.Context, ls []backend.Lease) ([]backend.Renewal, error) {
	return p.m.Extend(ctx, ls)
}
func (p plain) TTL(ctx context.Context, l backend.Lease) (time.Duration, error) {
	return p.m.TTL(ctx, l)
}
func (p plain) Abandon(ctx context.Context, key, owner string) error {
	return p.m.Abandon(ctx, key, owner)
}
