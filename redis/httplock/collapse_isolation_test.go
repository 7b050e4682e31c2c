package httplock_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redfence/redfence/internal/redistest"
	httplock "github.com/redfence/redfence/redis/httplock"
)

// Each test in this file checks that a shared response reaches no client
// it was not meant for, or that no client holds up the others.

// stalledWriter is a client that does not read its response: every Write
// blocks until release is closed. blocked is called when one does.
type stalledWriter struct {
	http.ResponseWriter
	blocked func()
	release <-chan struct{}
}

func (s *stalledWriter) Write(p []byte) (int, error) {
	s.blocked()
	<-s.release
	return s.ResponseWriter.Write(p)
}

// TestSlowLeaderClientDoesNotHoldFollowers: the leader's client does not
// read its response. A follower on another replica is served that response
// while the leader's write is still blocked; the leader's client gets it
// whole once it reads.
func TestSlowLeaderClientDoesNotHoldFollowers(t *testing.T) {
	release := make(chan struct{})
	unstall := sync.OnceFunc(func() { close(release) })
	defer unstall() // before the servers close: they wait for the leader
	blocked := make(chan struct{})
	markBlocked := sync.OnceFunc(func() { close(blocked) })
	outer := func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Header.Get("X-Stalled") != "" {
				w = &stalledWriter{ResponseWriter: w, blocked: markBlocked, release: release}
			}
			next.ServeHTTP(w, r)
		})
	}
	p := newPairWith(t, func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "page") }, outer)
	c := client(t)
	first := make(chan result, 1)
	go func() {
		first <- get(context.Background(), c, http.MethodGet, p.servers[0].URL+"/p", http.Header{"X-Stalled": {"1"}})
	}()
	require.Eventually(t, func() bool { return p.calls.Load() >= 1 }, 5*time.Second, time.Millisecond)

	b := get(context.Background(), c, http.MethodGet, p.servers[1].URL+"/p", nil)
	require.NoError(t, b.err)
	assert.Equal(t, httplock.RoleShared, b.role, "the follower did not wait for the leader's client")
	assert.Equal(t, "page", b.body)
	select {
	case <-blocked:
	case <-time.After(10 * time.Second):
		t.Fatal("the leader's response was never written")
	}
	select {
	case <-first:
		t.Fatal("the leader's client got its response before it read")
	default:
	}
	// The leader's flight is over on its own replica too: a request there
	// is served while the leader's write is still blocked.
	local := get(context.Background(), c, http.MethodGet, p.servers[0].URL+"/p", nil)
	require.NoError(t, local.err)
	assert.Equal(t, httplock.RoleShared, local.role)
	assert.Equal(t, "page", local.body)

	unstall()
	a := <-first
	require.NoError(t, a.err)
	assert.Equal(t, httplock.RoleLeader, a.role)
	assert.Equal(t, "page", a.body)
	assert.Equal(t, int64(1), p.calls.Load())
}

// TestRequestBodyBypasses: a GET with a body is answered from what the
// body says, which is not in the key; it is nobody else's answer.
func TestRequestBodyBypasses(t *testing.T) {
	p := newPair(t, func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		fmt.Fprint(w, "query: "+string(b))
	})
	c := client(t)
	first := make(chan result, 1)
	go func() {
		req, err := http.NewRequest(http.MethodGet, p.servers[0].URL+"/search", strings.NewReader("secret"))
		if err != nil {
			first <- result{err: err}
			return
		}
		req.Host = serviceHost
		resp, err := c.Do(req)
		if err != nil {
			first <- result{err: err}
			return
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		first <- result{status: resp.StatusCode, body: string(body), role: resp.Header.Get(httplock.DefaultRoleHeader), err: err}
	}()
	require.Eventually(t, func() bool { return p.calls.Load() >= 1 }, 5*time.Second, time.Millisecond)
	b := get(context.Background(), c, http.MethodGet, p.servers[1].URL+"/search", nil)
	a := <-first
	require.NoError(t, a.err)
	require.NoError(t, b.err)
	assert.Equal(t, "query: secret", a.body)
	assert.Equal(t, httplock.RoleBypass, a.role)
	assert.Equal(t, "query: ", b.body)
	assert.NotEqual(t, httplock.RoleShared, b.role)
}

// TestIdentityAndOverridesBypass: a request that carries an identity
// (headers authenticating proxies set), stands for another URL or method,
// or asks for a reload is answered for itself alone.
func TestIdentityAndOverridesBypass(t *testing.T) {
	echo := func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, r.Header.Get("X-Forwarded-User")+r.Header.Get("X-Api-Key")+r.Header.Get("X-Original-Url"))
	}
	for _, tc := range []struct {
		name string
		hdr  http.Header
	}{
		{"X-Api-Key", http.Header{"X-Api-Key": {"tenant-a"}}},
		{"X-Forwarded-User", http.Header{"X-Forwarded-User": {"alice"}}},
		{"X-Original-Url", http.Header{"X-Original-Url": {"/admin"}}},
		{"Cache-Control no-cache", http.Header{"Cache-Control": {"no-cache"}}},
		{"Pragma no-cache", http.Header{"Pragma": {"no-cache"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newPair(t, echo)
			a, b := p.send(t, client(t), "/me", tc.hdr, nil)
			assert.Equal(t, httplock.RoleBypass, a.role)
			assert.NotEqual(t, httplock.RoleShared, b.role)
			assert.Equal(t, "", b.body, "the follower got its own answer")
			assert.Equal(t, int64(2), p.calls.Load())
		})
	}
}

// TestNonCanonicalResponseHeadersAreChecked: a handler that writes the
// header map directly, in lower case, is held to the same rules.
func TestNonCanonicalResponseHeadersAreChecked(t *testing.T) {
	for _, tc := range []struct{ name, value string }{
		{"set-cookie", "session=alice"},
		{"cache-control", "private"},
		{"pragma", "no-cache"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newPair(t, func(w http.ResponseWriter, r *http.Request) {
				w.Header()[tc.name] = []string{tc.value}
				fmt.Fprint(w, "page")
			})
			_, b := p.send(t, client(t), "/p", nil, nil)
			assert.NotEqual(t, httplock.RoleShared, b.role)
			assert.Equal(t, int64(2), p.calls.Load())
		})
	}
}

// TestCacheControlLimitsSharing: a response that must be revalidated, or
// is stale, is not shared; one fresh for less than the share window is kept
// no longer.
func TestCacheControlLimitsSharing(t *testing.T) {
	for _, tc := range []struct {
		name, header, value string
	}{
		{"no-cache", "Cache-Control", "public, no-cache"},
		{"max-age=0", "Cache-Control", "max-age=0"},
		{"s-maxage=0", "Cache-Control", "max-age=60, s-maxage=0"},
		{"Pragma", "Pragma", "no-cache"},
		{"Expires past", "Expires", "Thu, 01 Jan 1970 00:00:00 GMT"},
		{"Expires invalid", "Expires", "0"},
		{"Set-Cookie2", "Set-Cookie2", "s=1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newPair(t, func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set(tc.header, tc.value)
				fmt.Fprint(w, "page")
			})
			_, b := p.send(t, client(t), "/p", nil, nil)
			assert.NotEqual(t, httplock.RoleShared, b.role)
			assert.Equal(t, int64(2), p.calls.Load())
		})
	}
	t.Run("s-maxage shortens the window", func(t *testing.T) {
		p := newPair(t, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Cache-Control", "max-age=60, s-maxage=1")
			fmt.Fprint(w, "page")
		}, httplock.WithShareWindow(time.Minute))
		_, b := p.send(t, client(t), "/p", nil, nil)
		assert.Equal(t, httplock.RoleShared, b.role)
		keys, err := p.rdb.Keys(context.Background(), httplock.DefaultPrefix+"*").Result()
		require.NoError(t, err)
		require.Len(t, keys, 1)
		ttl, err := p.rdb.PTTL(context.Background(), keys[0]).Result()
		require.NoError(t, err)
		assert.LessOrEqual(t, ttl, time.Second, "kept for its s-maxage, not the share window")
	})
}

// TestVaryValuesAreNotStored: the request values a response varies on
// (here a token) are matched, but only their digest is in Redis.
func TestVaryValuesAreNotStored(t *testing.T) {
	const token = "bearer-s3cret-token"
	p := newPair(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Vary", "X-Token")
		fmt.Fprint(w, "page")
	})
	hdr := http.Header{"X-Token": {token}}
	_, b := p.send(t, client(t), "/p", hdr, hdr)
	assert.Equal(t, httplock.RoleShared, b.role, "the same value matches")
	other := get(context.Background(), client(t), http.MethodGet, p.servers[1].URL+"/p", http.Header{"X-Token": {"another"}})
	assert.Equal(t, httplock.RoleBypass, other.role, "another value does not")
	keys, err := p.rdb.Keys(context.Background(), httplock.DefaultPrefix+"*").Result()
	require.NoError(t, err)
	require.NotEmpty(t, keys)
	for _, k := range keys {
		v, err := p.rdb.Get(context.Background(), k).Result()
		require.NoError(t, err)
		assert.NotContains(t, v, token)
	}
}

// TestWaiterLeadsWithoutItsSubscription: a request that waited on another
// replica's leader, stalled past its TTL, leads the next origin call;
// it holds no subscription (a connection of its own) while it does.
func TestWaiterLeadsWithoutItsSubscription(t *testing.T) {
	rdb, srv := redistest.Redis(t)
	var calls atomic.Int64
	unstall := make(chan struct{})
	subs := make(chan int64, 1)
	origin := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch calls.Add(1) {
		case 1:
			<-unstall
		case 2:
			subs <- subscribers(rdb)
		}
		fmt.Fprint(w, "fresh")
	})
	id := func(h http.Handler) http.Handler { return h }
	servers := replicasOn(t, srv, 2, origin, id, httplock.WithTTL(200*time.Millisecond), httplock.WithWait(10*time.Second))
	c := client(t)
	stalled := make(chan result, 1)
	defer func() { close(unstall); <-stalled }() // before the servers close: they wait for the stalled call
	go func() { stalled <- get(context.Background(), c, http.MethodGet, servers[0].URL+"/s", nil) }()
	require.Eventually(t, func() bool { return calls.Load() == 1 }, 5*time.Second, time.Millisecond)
	b := get(context.Background(), c, http.MethodGet, servers[1].URL+"/s", nil)
	require.NoError(t, b.err)
	assert.Equal(t, httplock.RoleLeader, b.role)
	assert.Equal(t, int64(0), <-subs)
}
