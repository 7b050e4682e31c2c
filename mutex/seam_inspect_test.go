package mutex_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redfence/redfence/mutex"
	"github.com/redfence/redfence/mutex/backend"
	"github.com/redfence/redfence/mutex/lockdebug"
)

// inspecting is a memory that also wakes its watchers and shows its locks
// (backend.Inspector): inspection, listing, forced release and the debug
// page run through the exported seam alone.
type inspecting struct{ watching }

var _ backend.Inspector = inspecting{}

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

func (i inspecting) Inspect(_ context.Context, key string) (backend.KeyState, error) {
	m := i.memory
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.state(key, time.Now()), nil
}

// List walks the keys in order; a cursor is "after:" and the last key
// returned.
// List makes up to r.Scans "round trips" of r.Count keys each, in key
// order, until r.Limit keys matched; a cursor is "after:" and the last key
// returned.
func (i inspecting) List(_ context.Context, r backend.ListRequest) (backend.ListPage, error) {
	after, ok := strings.CutPrefix(r.Cursor, "after:")
	if r.Cursor != "" && !ok {
		return backend.ListPage{RoundTrips: 1}, fmt.Errorf("%w: %q", backend.ErrBadCursor, r.Cursor)
	}
	m := i.memory
	m.mu.Lock()
	defer m.mu.Unlock()
	var keys []string
	for k := range m.locks {
		if strings.HasPrefix(k, r.Prefix) && k > after {
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

func (i inspecting) ForceRelease(_ context.Context, key string, f backend.Force) (backend.Forced, error) {
	m := i.memory
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
	if m.audit == nil {
		m.audit = map[string][]backend.ForceRecord{}
	}
	m.audit[key] = append([]backend.ForceRecord{rec}, m.audit[key]...)
	m.free(key)
	return backend.Forced{Released: true, Token: k.token, Floor: floor, Owner: k.owner, Count: int(k.count)}, nil
}

func newInspecting() inspecting { return inspecting{watching{newMemory()}} }

// Inspect over an outside backend: the holder's token, owner (with the
// OwnerInfo read back from its id), count and lease; a free key.
func TestSeamInspect(t *testing.T) {
	m := newInspecting()
	a := memLocker(t, m, mutex.WithOwnerInfo(mutex.OwnerInfo{Service: "billing", Label: "v2"}))
	b := memLocker(t, m)
	ctx := seamCtx(t)
	lk, err := a.Lock(ctx, "i", mutex.WithTTL(time.Hour))
	require.NoError(t, err)
	in, err := b.Inspect(ctx, "i")
	require.NoError(t, err)
	assert.Equal(t, mutex.Held, in.State)
	assert.Equal(t, "i", in.Key)
	assert.Equal(t, "t:i", in.Name)
	assert.Equal(t, lk.Token(), in.Token)
	assert.Equal(t, 1, in.Count)
	assert.Equal(t, "billing", in.Info.Service)
	assert.Equal(t, "v2", in.Info.Label)
	assert.Positive(t, in.Lease)
	assert.LessOrEqual(t, in.Lease, time.Hour)
	assert.False(t, in.AcquiredAt.IsZero())

	require.NoError(t, lk.Unlock(ctx))
	in, err = b.Inspect(ctx, "i")
	require.NoError(t, err)
	assert.Equal(t, mutex.Free, in.State)
	assert.Empty(t, in.Owner)

	_, err = memLocker(t, newMemory()).Inspect(ctx, "i")
	assert.ErrorIs(t, err, errors.ErrUnsupported, "no Inspector: the fallback")
}

// List over an outside backend: the Locker's prefix only, the match
// pattern, page after page with the backend's cursor, a cursor the backend
// refuses as bad input, and Limit ending a call early.
func TestSeamList(t *testing.T) {
	m := newInspecting()
	a := memLocker(t, m)
	other := mutex.NewWithBackend(m, mutex.WithPrefix("u:"))
	t.Cleanup(func() { assert.NoError(t, other.Close()) })
	ctx := seamCtx(t)
	for _, key := range []string{"orders:1", "orders:2", "orders:3", "jobs:1"} {
		_, err := a.Lock(ctx, key, mutex.WithTTL(time.Hour))
		require.NoError(t, err)
	}
	_, err := other.Lock(ctx, "orders:9", mutex.WithTTL(time.Hour))
	require.NoError(t, err)

	page, err := a.List(ctx, mutex.ListOptions{Match: "orders:*"})
	require.NoError(t, err)
	assert.Equal(t, []string{"orders:1", "orders:2", "orders:3"}, keysOf(page.Locks), "the prefix's keys that match")
	assert.Empty(t, page.Cursor, "one page held them all")
	assert.Equal(t, 1, page.RoundTrips)

	var all []string
	o := mutex.ListOptions{Scans: 1, Count: 1}
	for pages := 0; ; pages++ {
		require.Less(t, pages, 10, "the listing does not end")
		page, err := a.List(ctx, o)
		require.NoError(t, err)
		assert.Equal(t, 1, page.RoundTrips)
		all = append(all, keysOf(page.Locks)...)
		if page.Cursor == "" {
			break
		}
		o.Cursor = page.Cursor
	}
	assert.Equal(t, []string{"jobs:1", "orders:1", "orders:2", "orders:3"}, all, "page after page, each key once")

	page, err = a.List(ctx, mutex.ListOptions{Count: 1, Limit: 2})
	require.NoError(t, err)
	assert.Len(t, page.Locks, 2, "Limit ended the call")
	assert.Equal(t, 2, page.RoundTrips)
	assert.NotEmpty(t, page.Cursor)

	_, err = a.List(ctx, mutex.ListOptions{Cursor: "3:0::127.0.0.1:6379"})
	assert.ErrorIs(t, err, mutex.ErrInvalid, "a cursor the backend did not hand out")
	locks, err := other.ListAll(ctx, mutex.ListOptions{})
	require.NoError(t, err)
	assert.Equal(t, []string{"orders:9"}, keysOf(locks))
}

// A forced release over an outside backend: the holder loses the lock (its
// context ends with ErrLockLost), a waiter of another Locker takes it with
// a token above the floor, and Inspect shows the audit entry; a second release, or one of another token, finds nothing held.
func TestSeamForceRelease(t *testing.T) {
	m := newInspecting()
	a, b, op := memLocker(t, m), memLocker(t, m), memLocker(t, m)
	ctx := seamCtx(t)
	lk, err := a.Lock(ctx, "f", mutex.WithTTL(600*time.Millisecond))
	require.NoError(t, err)
	got := make(chan *mutex.Lock, 1)
	go func() {
		w, err := b.Lock(ctx, "f", mutex.WithRetry(time.Hour, time.Hour), mutex.WithTTL(time.Hour))
		assert.NoError(t, err)
		got <- w
	}()
	require.Eventually(t, func() bool { return m.watched() == 1 }, 10*time.Second, time.Millisecond)

	_, err = op.ForceRelease(ctx, "f", mutex.ForceOptions{Token: lk.Token() + 7, Reason: "stuck"})
	assert.ErrorIs(t, err, mutex.ErrNotHeld, "another token")
	res, err := op.ForceRelease(ctx, "f", mutex.ForceOptions{Token: lk.Token(), By: "ops", Reason: "stuck"})
	require.NoError(t, err)
	assert.Equal(t, lk.Token(), res.Token)
	assert.Greater(t, res.Floor, res.Token)
	assert.Equal(t, 1, res.Released)

	w := <-got
	require.NotNil(t, w)
	assert.Greater(t, w.Token(), res.Floor, "later tokens exceed the floor")
	select {
	case <-lk.Context().Done():
	case <-ctx.Done():
		t.Fatal("the holder was never told")
	}
	assert.ErrorIs(t, context.Cause(lk.Context()), mutex.ErrLockLost)

	in, err := op.Inspect(ctx, "f")
	require.NoError(t, err)
	require.Len(t, in.Forced, 1)
	assert.Equal(t, "ops", in.Forced[0].By)
	assert.Equal(t, "stuck", in.Forced[0].Reason)
	assert.Equal(t, res.Token, in.Forced[0].Token)
	assert.Equal(t, res.Floor, in.Forced[0].Floor)
	require.NoError(t, w.Unlock(ctx))
	_, err = op.ForceRelease(ctx, "f", mutex.ForceOptions{Reason: "again"})
	assert.ErrorIs(t, err, mutex.ErrNotHeld, "nobody holds it")
}

// The debug page lists an outside backend's locks (all=1), and answers 501
// for a backend without inspection.
func TestSeamDebugPage(t *testing.T) {
	m := newInspecting()
	a := memLocker(t, m, mutex.WithOwnerInfo(mutex.OwnerInfo{Service: "billing"}))
	ctx := seamCtx(t)
	lk, err := a.Lock(ctx, "orders:1", mutex.WithTTL(time.Hour))
	require.NoError(t, err)

	rec := httptest.NewRecorder()
	lockdebug.Handler(a).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/?all=1&format=json", nil))
	require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
	var p struct {
		Listing struct {
			Complete bool `json:"complete"`
			Locks    []struct {
				Key       string `json:"key"`
				State     string `json:"state"`
				Token     int64  `json:"token"`
				OwnerInfo struct {
					Service string `json:"service"`
				} `json:"owner_info"`
			} `json:"locks"`
		} `json:"listing"`
	}
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &p))
	assert.True(t, p.Listing.Complete)
	require.Len(t, p.Listing.Locks, 1, rec.Body.String())
	assert.Equal(t, "orders:1", p.Listing.Locks[0].Key)
	assert.Equal(t, "held", p.Listing.Locks[0].State)
	assert.Equal(t, lk.Token(), p.Listing.Locks[0].Token)
	assert.Equal(t, "billing", p.Listing.Locks[0].OwnerInfo.Service)

	rec = httptest.NewRecorder()
	lockdebug.Handler(memLocker(t, newMemory())).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/?all=1&format=json", nil))
	assert.Equal(t, http.StatusNotImplemented, rec.Code, "no Inspector: 501")
}

func keysOf(locks []mutex.LockInfo) []string {
	out := make([]string, len(locks))
	for i, in := range locks {
		out[i] = in.Key
	}
	return out
}
