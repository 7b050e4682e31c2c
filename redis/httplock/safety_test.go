package httplock_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redfence/redfence/internal/redistest"
	httplock "github.com/redfence/redfence/redis/httplock"
)

// The tests in this file follow one table: one test for each
// way a shared response reached a client it was not meant for. Each sends
// the two requests of a case so that they overlap (see pair), or one after
// the other within the share window.

// noFollow is client's, without following redirects.
func noFollow(t *testing.T) *http.Client {
	c := client(t)
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return c
}

// TestConditionalRequestsAreNotShared ("conditional request"): a request
// with a validator or a range is answered about its own copy; its 304, 412
// or 206 reaches no one else, and a request without one gets the page.
// Those statuses are never stored, even when the origin sends them unasked
// and WithShareStatus would take anything.
func TestConditionalRequestsAreNotShared(t *testing.T) {
	modified := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	const page = "the whole page"
	serve := func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("ETag", `"v1"`)
		http.ServeContent(w, r, "page.txt", modified, strings.NewReader(page))
	}
	for _, tc := range []struct {
		name   string
		hdr    http.Header
		status int
	}{
		{"If-None-Match", http.Header{"If-None-Match": {`"v1"`}}, http.StatusNotModified},
		{"If-Modified-Since", http.Header{"If-Modified-Since": {modified.Format(http.TimeFormat)}}, http.StatusNotModified},
		{"If-Match", http.Header{"If-Match": {`"v0"`}}, http.StatusPreconditionFailed},
		{"If-Unmodified-Since", http.Header{"If-Unmodified-Since": {modified.Add(-time.Hour).Format(http.TimeFormat)}}, http.StatusPreconditionFailed},
		{"Range", http.Header{"Range": {"bytes=0-2"}}, http.StatusPartialContent},
		{"If-Range", http.Header{"If-Range": {`"v1"`}, "Range": {"bytes=0-2"}}, http.StatusPartialContent},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newPair(t, serve)
			a, b := p.send(t, client(t), "/page", tc.hdr, nil)
			assert.Equal(t, tc.status, a.status)
			assert.Equal(t, httplock.RoleBypass, a.role)
			assert.Equal(t, http.StatusOK, b.status)
			assert.Equal(t, page, b.body)
			assert.NotEqual(t, httplock.RoleShared, b.role)
		})
	}
	for _, status := range []int{http.StatusPartialContent, http.StatusNotModified, http.StatusPreconditionFailed} {
		t.Run(fmt.Sprintf("%d never stored", status), func(t *testing.T) {
			var n atomic.Int64
			p := newPair(t, func(w http.ResponseWriter, r *http.Request) {
				if n.Add(1) == 1 {
					w.WriteHeader(status) // to a request that asked for no such thing
					return
				}
				fmt.Fprint(w, page)
			}, httplock.WithShareStatus(func(int) bool { return true }))
			a, b := p.send(t, client(t), "/page", nil, nil)
			assert.Equal(t, status, a.status)
			assert.Equal(t, http.StatusOK, b.status)
			assert.Equal(t, page, b.body)
			later := get(context.Background(), client(t), http.MethodGet, p.servers[1].URL+"/page", nil)
			assert.Equal(t, http.StatusOK, later.status, "nothing of the %d was left for later requests", status)
		})
	}
}

// TestRequestInputsAreInTheKey ("unkeyed input"): the origin redirects to
// its login page at the address the client used, as frameworks do from the
// Host and the forwarding headers. A request that sets any of them to
// another site is answered for that site alone.
func TestRequestInputsAreInTheKey(t *testing.T) {
	login := func(w http.ResponseWriter, r *http.Request) {
		proto, host := "https", r.Host
		if v := r.Header.Get("X-Forwarded-Proto"); v != "" {
			proto = v
		}
		if v := r.Header.Get("X-Forwarded-Host"); v != "" {
			host = v
		}
		for _, kv := range strings.Split(r.Header.Get("Forwarded"), ";") {
			switch k, v, _ := strings.Cut(strings.TrimSpace(kv), "="); strings.ToLower(k) {
			case "host":
				host = v
			case "proto":
				proto = v
			}
		}
		if v := r.Header.Get("X-Forwarded-Scheme"); v != "" {
			proto = v
		}
		if r.Header.Get("X-Forwarded-Ssl") == "off" {
			proto = "http"
		}
		if v := r.Header.Get("X-Forwarded-Port"); v != "" {
			host += ":" + v
		}
		http.Redirect(w, r, proto+"://"+host+r.Header.Get("X-Forwarded-Prefix")+"/login", http.StatusMovedPermanently)
	}
	want := "https://" + serviceHost + "/login"
	cases := []struct {
		name string
		hdr  http.Header
	}{
		{"X-Forwarded-Host", http.Header{"X-Forwarded-Host": {"evil.example"}}},
		{"Host", http.Header{"Host": {"evil.example"}}},
		{"X-Forwarded-Proto", http.Header{"X-Forwarded-Proto": {"http"}}},
		{"Forwarded", http.Header{"Forwarded": {"host=evil.example;proto=http"}}},
		{"X-Forwarded-Scheme", http.Header{"X-Forwarded-Scheme": {"http"}}},
		{"X-Forwarded-Ssl", http.Header{"X-Forwarded-Ssl": {"off"}}},
		{"X-Forwarded-Port", http.Header{"X-Forwarded-Port": {"8443"}}},
		{"X-Forwarded-Prefix", http.Header{"X-Forwarded-Prefix": {"/evil"}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := newPair(t, login)
			a, b := p.send(t, noFollow(t), "/account", tc.hdr, nil)
			assert.NotEqual(t, want, a.header.Get("Location"), "the first request is answered for its own site")
			assert.Equal(t, want, b.header.Get("Location"))
			assert.Equal(t, int64(2), p.calls.Load())
		})
	}
	t.Run("WithoutKeyHeaders", func(t *testing.T) {
		// Taken out of the key, a header no longer tells requests apart: for
		// origins that never read it.
		p := newPair(t, login, httplock.WithoutKeyHeaders("x-forwarded-host"))
		_, b := p.send(t, noFollow(t), "/account", cases[0].hdr, nil)
		assert.Equal(t, httplock.RoleShared, b.role)
		assert.Equal(t, "https://evil.example/login", b.header.Get("Location"))
	})
	t.Run("WithoutKeyHeaders X-Forwarded-Prefix", func(t *testing.T) {
		p := newPair(t, login, httplock.WithoutKeyHeaders("X-Forwarded-Prefix"))
		_, b := p.send(t, noFollow(t), "/account", http.Header{"X-Forwarded-Prefix": {"/evil"}}, nil)
		assert.Equal(t, httplock.RoleShared, b.role)
	})
}

// TestAccessDecisionsAreNotShared ("access decisions"): an answer about one
// client (refused, rate-limited, or for its credentials) reaches no other.
func TestAccessDecisionsAreNotShared(t *testing.T) {
	const abuser, innocent = "198.51.100.7", "192.0.2.1"
	for _, status := range []int{http.StatusUnauthorized, http.StatusForbidden, http.StatusProxyAuthRequired, http.StatusTooManyRequests} {
		t.Run(fmt.Sprint(status), func(t *testing.T) {
			p := newPair(t, func(w http.ResponseWriter, r *http.Request) {
				if r.Header.Get("X-Forwarded-For") == abuser {
					http.Error(w, "not you", status)
					return
				}
				fmt.Fprint(w, "the data")
			})
			a, b := p.send(t, client(t), "/data",
				http.Header{"X-Forwarded-For": {abuser}}, http.Header{"X-Forwarded-For": {innocent}})
			assert.Equal(t, status, a.status)
			assert.Equal(t, http.StatusOK, b.status)
			assert.Equal(t, "the data", b.body)
		})
	}
	t.Run("429 opted in", func(t *testing.T) {
		// An origin whose limit is global, not per client, may share it.
		p := newPair(t, func(w http.ResponseWriter, r *http.Request) {
			http.Error(w, "slow down", http.StatusTooManyRequests)
		}, httplock.WithShareStatus(func(s int) bool { return httplock.DefaultShareStatus(s) || s == http.StatusTooManyRequests }))
		_, b := p.send(t, client(t), "/data", nil, nil)
		assert.Equal(t, http.StatusTooManyRequests, b.status)
		assert.Equal(t, httplock.RoleShared, b.role)
	})
	greet := func(header string) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "for "+r.Header.Get(header)) }
	}
	t.Run("Proxy-Authorization", func(t *testing.T) {
		p := newPair(t, greet("Proxy-Authorization"))
		a, b := p.send(t, client(t), "/me", http.Header{"Proxy-Authorization": {"Basic YWxpY2U6eA=="}}, nil)
		assert.Equal(t, httplock.RoleBypass, a.role)
		assert.Equal(t, "for ", b.body)
	})
	t.Run("X-Api-Key", func(t *testing.T) {
		p := newPair(t, greet("X-Api-Key"), httplock.WithCredentialHeaders("X-Api-Key"))
		a, b := p.send(t, client(t), "/invoices", http.Header{"X-Api-Key": {"tenant-a"}}, http.Header{"X-Api-Key": {"tenant-b"}})
		assert.Equal(t, "for tenant-a", a.body)
		assert.Equal(t, "for tenant-b", b.body)
		assert.Equal(t, httplock.RoleBypass, b.role)
	})
	t.Run("IP allow-list with WithKey", func(t *testing.T) {
		// An answer that depends on the client's address depends on nothing
		// httplock can see: WithKey tells it (the documented contract).
		inside := func(r *http.Request) bool { return strings.HasPrefix(r.Header.Get("X-Forwarded-For"), "10.") }
		p := newPair(t, func(w http.ResponseWriter, r *http.Request) {
			if !inside(r) {
				http.Error(w, "outside", http.StatusForbidden)
				return
			}
			fmt.Fprint(w, "internal admin data")
		}, httplock.WithKey(func(r *http.Request) string { return fmt.Sprint(inside(r)) }))
		a, b := p.send(t, client(t), "/admin", http.Header{"X-Forwarded-For": {"10.0.0.5"}}, http.Header{"X-Forwarded-For": {innocent}})
		assert.Equal(t, "internal admin data", a.body)
		assert.Equal(t, http.StatusForbidden, b.status)
	})
}

// TestServicesOnOneRedisDoNotShare ("two services, one Redis"): two
// services answer one path differently. Reached under different names they
// never share; reached under one name, namespaces keep them apart.
func TestServicesOnOneRedisDoNotShare(t *testing.T) {
	id := func(h http.Handler) http.Handler { return h }
	for _, tc := range []struct {
		name         string
		hostA, hostB string
		optsA, optsB []httplock.Option
	}{
		{"different names", "a.internal", "b.internal", nil, nil},
		{"one name, two namespaces", "gateway.internal", "gateway.internal",
			[]httplock.Option{httplock.WithNamespace("a")}, []httplock.Option{httplock.WithNamespace("b")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, srv := redistest.Redis(t)
			status := func(name string) http.HandlerFunc {
				return func(w http.ResponseWriter, _ *http.Request) { fmt.Fprint(w, name+" is fine") }
			}
			a := replicasOn(t, srv, 1, status("service A"), id, tc.optsA...)[0]
			b := replicasOn(t, srv, 1, status("service B"), id, tc.optsB...)[0]
			c := client(t)
			ra := get(context.Background(), c, http.MethodGet, a.URL+"/status", http.Header{"Host": {tc.hostA}})
			rb := get(context.Background(), c, http.MethodGet, b.URL+"/status", http.Header{"Host": {tc.hostB}})
			assert.Equal(t, "service A is fine", ra.body)
			assert.Equal(t, "service B is fine", rb.body, "within A's share window")
			assert.Equal(t, httplock.RoleLeader, rb.role)
		})
	}
}

// TestOuterHeadersStayWithTheirResponse ("outer middleware"): headers set
// before httplock ran are each request's own; the handler's are shared,
// including an outer header it changed.
func TestOuterHeadersStayWithTheirResponse(t *testing.T) {
	outer := func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("X-Request-Id", r.Header.Get("X-Client"))
			w.Header().Set("X-Frame-Options", "DENY")
			next.ServeHTTP(w, r)
		})
	}
	p := newPairWith(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Origin", "computed")
		w.Header().Set("X-Frame-Options", "SAMEORIGIN")
		fmt.Fprint(w, "page")
	}, outer)
	a, b := p.send(t, client(t), "/p", http.Header{"X-Client": {"a"}}, http.Header{"X-Client": {"b"}})
	require.Equal(t, httplock.RoleShared, b.role)
	assert.Equal(t, "a", a.header.Get("X-Request-Id"))
	assert.Equal(t, "b", b.header.Get("X-Request-Id"), "the follower keeps its own request id")
	assert.Equal(t, "computed", b.header.Get("X-Origin"))
	assert.Equal(t, "SAMEORIGIN", b.header.Get("X-Frame-Options"), "what the handler changed is the handler's")
	assert.Equal(t, int64(1), p.calls.Load())
}

// TestUnshareableAnswerEndsWithItsFlight ("one unshareable answer"): after
// an answer that is not shared, the next identical requests lead a new
// flight and collapse as usual, within what was the share window.
func TestUnshareableAnswerEndsWithItsFlight(t *testing.T) {
	for _, tc := range []struct {
		name  string
		first func(w http.ResponseWriter)
	}{
		{"503", func(w http.ResponseWriter) { http.Error(w, "down", http.StatusServiceUnavailable) }},
		{"Set-Cookie", func(w http.ResponseWriter) {
			http.SetCookie(w, &http.Cookie{Name: "s", Value: "1"})
			fmt.Fprint(w, "yours")
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var calls atomic.Int64
			origin := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if calls.Add(1) == 1 {
					tc.first(w)
					return
				}
				time.Sleep(100 * time.Millisecond) // the origin's latency: the burst overlaps
				fmt.Fprint(w, "fresh")
			})
			servers := replicas(t, 2, origin)
			first := get(context.Background(), client(t), http.MethodGet, servers[0].URL+"/x", nil)
			require.NoError(t, first.err)
			rs := burst(t, servers, 10, http.MethodGet, "/x", nil)
			for _, r := range rs {
				require.NoError(t, r.err)
				assert.Equal(t, "fresh", r.body)
			}
			assert.Equal(t, int64(2), calls.Load(), "the unshareable answer, then one call for the burst")
			assert.Equal(t, map[string]int{httplock.RoleLeader: 1, httplock.RoleShared: len(rs) - 1}, roles(rs))
		})
	}
}

// TestPanicAnswersOnlyItsWaiters ("WithPanicStatus"): a panic answers the
// requests waiting on that leader (TestPanickingLeaderReleasesFollowers),
// and no later one.
func TestPanicAnswersOnlyItsWaiters(t *testing.T) {
	var calls atomic.Int64
	origin := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) == 1 {
			panic("origin bug")
		}
		fmt.Fprint(w, "recovered")
	})
	servers := replicas(t, 2, origin, httplock.WithPanicStatus(http.StatusBadGateway))
	c := client(t)
	require.Error(t, get(context.Background(), c, http.MethodGet, servers[0].URL+"/p", nil).err, "net/http drops the panicking request")
	for _, s := range servers {
		r := get(context.Background(), c, http.MethodGet, s.URL+"/p", nil)
		require.NoError(t, r.err)
		assert.Equal(t, http.StatusOK, r.status)
		assert.Equal(t, "recovered", r.body)
	}
	assert.Equal(t, int64(2), calls.Load(), "the panic, then one new flight, shared")
}

// TestContentEncodingOnlyWhereAccepted ("compressed origin without Vary"):
// the origin compresses for clients that ask and forgets Vary; a follower
// is given the compressed response only if its Accept-Encoding takes it.
func TestContentEncodingOnlyWhereAccepted(t *testing.T) {
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	_, _ = zw.Write([]byte("hello"))
	require.NoError(t, zw.Close())
	handle := func(w http.ResponseWriter, r *http.Request) {
		if strings.Contains(r.Header.Get("Accept-Encoding"), "gzip") {
			w.Header().Set("Content-Encoding", "gzip")
			_, _ = w.Write(gz.Bytes())
			return
		}
		fmt.Fprint(w, "hello")
	}
	// A client that sends Accept-Encoding only when told to, and does not
	// decompress: what it asked for is what it gets.
	tr := &http.Transport{DisableCompression: true}
	t.Cleanup(tr.CloseIdleConnections)
	c := &http.Client{Transport: tr, Timeout: 30 * time.Second}
	for _, tc := range []struct {
		name   string
		accept []string
		shared bool
	}{
		{"no Accept-Encoding", nil, false},
		{"identity", []string{"identity"}, false},
		{"br only", []string{"br"}, false},
		{"star refused", []string{"*;q=0"}, false},
		{"gzip among others", []string{"deflate, gzip;q=0.5, br"}, true},
		{"star", []string{"*"}, true},
		{"x-gzip", []string{"x-gzip"}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newPair(t, handle)
			var hb http.Header
			if tc.accept != nil {
				hb = http.Header{"Accept-Encoding": tc.accept}
			}
			a, b := p.send(t, c, "/g", http.Header{"Accept-Encoding": {"gzip"}}, hb)
			assert.Equal(t, "gzip", a.header.Get("Content-Encoding"))
			if tc.shared {
				assert.Equal(t, httplock.RoleShared, b.role)
				assert.Equal(t, gz.String(), b.body)
				return
			}
			assert.Empty(t, b.header.Get("Content-Encoding"))
			assert.Equal(t, "hello", b.body)
			assert.Equal(t, httplock.RoleBypass, b.role)
		})
	}
}
