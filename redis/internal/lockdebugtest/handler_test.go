package lockdebugtest

import (
	"context"
	"fmt"
	"html"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redfence/redfence/internal/redistest"
	"github.com/redfence/redfence/mutex"
	"github.com/redfence/redfence/mutex/lockdebug"
)

// The locks a process holds, per Locker: key, token, re-entries, renewals,
// TTL and local waiters, in HTML and JSON.
func TestThisProcessLocks(t *testing.T) {
	eachDeployment(t, func(t *testing.T, c redis.UniversalClient) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		orders, idle := newLocker(t, c), newLocker(t, c)
		h := lockdebug.NamedHandler(lockdebug.Named{Name: "orders", Locker: orders}, lockdebug.Named{Name: "idle", Locker: idle})

		lk1, err := orders.Lock(ctx, "orders:1", mutex.WithTTL(time.Minute))
		require.NoError(t, err)
		again, err := orders.Lock(lk1.Context(), "orders:1")
		require.NoError(t, err)
		require.Same(t, lk1, again, "re-entry")
		lk2, err := orders.Lock(ctx, "orders:2", mutex.WithTTL(time.Minute), mutex.WithAutoRenew(false))
		require.NoError(t, err)
		require.NoError(t, lk2.Extend(ctx, 45*time.Second))
		waitInLock(t, orders, "orders:2")
		waitFor(t, ctx, "the waiter queued", func() bool {
			held := operator(t, orders).Held()
			return len(held) == 2 && held[1].Waiters == 1
		})

		rec := get(t, h, "")
		require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
		assertSafeHeaders(t, rec)
		assert.Equal(t, "text/html; charset=utf-8", rec.Header().Get("Content-Type"))
		body := rec.Body.String()
		assert.Contains(t, section(t, body, "h3", "idle"), "no locks held")
		rs := byKey(rows(section(t, body, "h3", "orders")))
		require.Len(t, rs, 2, body)
		r1, r2 := rs["orders:1"], rs["orders:2"]
		assert.Equal(t, strconv.FormatInt(lk1.Token(), 10), r1["token"])
		assert.Equal(t, "2", r1["count"], "re-entered once")
		assert.Equal(t, "yes", r1["auto-renew"])
		assert.Equal(t, "0", r1["renewals"])
		assert.Equal(t, "–", r1["last-renewal"])
		assert.Equal(t, "0", r1["waiters"])
		assert.Equal(t, "1m0s", r1["ttl"])
		assert.Equal(t, strconv.FormatInt(lk2.Token(), 10), r2["token"])
		assert.Equal(t, "1", r2["count"])
		assert.Equal(t, "no", r2["auto-renew"])
		assert.Equal(t, "1", r2["renewals"], "the Extend")
		assert.NotEqual(t, "–", r2["last-renewal"])
		assert.Equal(t, "45s", r2["ttl"], "Extend set the TTL")
		assertLeaseLeft(t, r2["lease"], 45*time.Second)
		assert.Equal(t, "1", r2["waiters"])
		assert.Empty(t, rows(section(t, body, "h2", "All locks")), "no listing unless asked")

		for name, rec := range map[string]*httptest.ResponseRecorder{
			"format=json": get(t, h, "?format=json"),
			"Accept":      get(t, h, "", "Accept", "application/json"),
		} {
			t.Run(name, func(t *testing.T) {
				require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
				assertSafeHeaders(t, rec)
				p := decode(t, rec)
				assert.Nil(t, p.Listing)
				assert.Equal(t, os.Getpid(), p.PID)
				require.Len(t, p.Lockers, 2)
				assert.Equal(t, "orders", p.Lockers[0].Name)
				assert.Equal(t, "idle", p.Lockers[1].Name)
				assert.Empty(t, p.Lockers[1].Held)
				require.Len(t, p.Lockers[0].Held, 2)
				assert.Equal(t, 2, p.Lockers[0].HeldTotal)
				h1, h2 := p.Lockers[0].Held[0], p.Lockers[0].Held[1]
				assert.Equal(t, "orders:1", h1.Key)
				assert.Equal(t, lk1.Token(), h1.Token)
				assert.Equal(t, 2, h1.Count)
				assert.True(t, h1.AutoRenew)
				assert.Zero(t, h1.Renewals)
				assert.Zero(t, h1.LastRenewal)
				assert.Zero(t, h1.Waiters)
				assert.Equal(t, 60000.0, h1.TTLMs)
				assert.WithinDuration(t, time.Now(), h1.Acquired, 30*time.Second)
				assert.Equal(t, time.UTC, h1.Acquired.Location())
				assert.Greater(t, h1.HeldMs, 0.0)
				assert.Equal(t, "orders:2", h2.Key)
				assert.Equal(t, lk2.Token(), h2.Token)
				assert.Equal(t, 1, h2.Count)
				assert.False(t, h2.AutoRenew)
				assert.Equal(t, 1, h2.Renewals)
				assert.Greater(t, h2.LastRenewal, 0.0)
				assert.Less(t, h2.LastRenewal, 30000.0)
				assert.Equal(t, 45000.0, h2.TTLMs)
				assert.Greater(t, h2.LeaseMs, 0.0)
				assert.LessOrEqual(t, h2.LeaseMs, 45000.0)
				assert.Equal(t, 1, h2.Waiters)
			})
		}
	})
}

// ?all=1 lists what another Locker holds, with its owner and the Lockers
// queued for it; the match pattern narrows the listing.
func TestListingShowsOtherLockers(t *testing.T) {
	host, _ := os.Hostname()
	eachDeployment(t, func(t *testing.T, c redis.UniversalClient) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		viewer := newLocker(t, c)
		billing := newLocker(t, c, mutex.WithOwnerInfo(mutex.OwnerInfo{Service: "billing", Label: "v2"}))
		reports := newLocker(t, c, mutex.WithOwnerInfo(mutex.OwnerInfo{Service: "reports"}))
		h := lockdebug.Handler(viewer)

		lk, err := billing.Lock(ctx, "invoice:7", mutex.WithTTL(time.Minute))
		require.NoError(t, err)
		waitInLock(t, reports, "invoice:7")
		op := operator(t, viewer)
		waitFor(t, ctx, "the reports Locker queued in Redis", func() bool {
			in, err := op.Inspect(ctx, "invoice:7")
			return err == nil && len(in.Waiters) == 1
		})
		owner := mutex.OwnerInfo{Service: "billing", Host: host, PID: os.Getpid(), Label: "v2"}

		rec := get(t, h, "?all=1")
		require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
		assertSafeHeaders(t, rec)
		body := rec.Body.String()
		assert.Contains(t, section(t, body, "h3", "locker"), "no locks held", "the viewer holds nothing itself")
		listing := section(t, body, "h2", "All locks")
		rs := rows(listing)
		require.Len(t, rs, 1, listing)
		r := rs[0]
		assert.Equal(t, "invoice:7", r["key"])
		assert.Equal(t, "held", r["state"])
		assert.Equal(t, strconv.FormatInt(lk.Token(), 10), r["token"])
		assert.Equal(t, owner.String(), r["owner"])
		assert.Equal(t, "1", r["count"])
		assert.Regexp(t, `^1 \(longest [0-9.]+(µs|ms|s)\)$`, r["waiters"])
		assert.Regexp(t, `^[0-9.]+(µs|ms|s)$`, r["held-for"])
		assertLeaseLeft(t, r["lease"], time.Minute)
		assert.Contains(t, listing, "end of listing")
		assert.NotContains(t, listing, `class="next"`)
		trips := regexp.MustCompile(`(\d+) round trips?</div>`).FindStringSubmatch(listing)
		require.NotNil(t, trips, listing)

		p := decode(t, get(t, h, "?all=1&format=json"))
		require.NotNil(t, p.Listing)
		assert.Empty(t, p.Listing.Error)
		assert.Equal(t, "", p.Listing.NextCursor, "the default bounds scan this keyspace whole")
		assert.Equal(t, trips[1], strconv.Itoa(p.Listing.RoundTrips), "the page shows List's round trips")
		assert.GreaterOrEqual(t, p.Listing.RoundTrips, 2, "a SCAN and the read")
		require.Len(t, p.Listing.Locks, 1)
		in := p.Listing.Locks[0]
		assert.Equal(t, "invoice:7", in.Key)
		assert.Equal(t, "held", in.State)
		assert.Equal(t, lk.Token(), in.Token)
		assert.Contains(t, in.Owner, "s=billing", "the raw owner id")
		require.NotNil(t, in.OwnerInfo)
		assert.Equal(t, jsonOwner{Service: "billing", Host: host, PID: os.Getpid(), Label: "v2"}, *in.OwnerInfo)
		assert.Equal(t, 1, in.Count)
		assert.Equal(t, time.UnixMicro(lk.Token()).UTC(), in.AcquiredAt)
		require.NotNil(t, in.HeldMs)
		assert.InDelta(t, float64(in.ServerTime.Sub(in.AcquiredAt))/1e6, *in.HeldMs, 0.001)
		assert.Greater(t, in.LeaseMs, 0.0)
		assert.LessOrEqual(t, in.LeaseMs, 60000.0)
		require.Len(t, in.Waiters, 1)
		require.NotNil(t, in.Waiters[0].OwnerInfo)
		assert.Equal(t, "reports", in.Waiters[0].OwnerInfo.Service)
		assert.GreaterOrEqual(t, in.Waiters[0].WaitedMs, 0.0)

		p = decode(t, get(t, h, "?all=1&format=json&match=invoice:*"))
		require.NotNil(t, p.Listing)
		assert.Equal(t, "invoice:*", p.Listing.Match)
		assert.Len(t, p.Listing.Locks, 1)
		p = decode(t, get(t, h, "?all=1&format=json&match=orders:*"))
		require.NotNil(t, p.Listing)
		assert.Empty(t, p.Listing.Locks, "the match is passed to List")
	})
}

// Small pages: following the next-page link (HTML) or next_cursor (JSON)
// to the end lists every held lock.
func TestListingPages(t *testing.T) {
	eachDeployment(t, func(t *testing.T, c redis.UniversalClient) {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		holder := newLocker(t, c, mutex.WithOwnerInfo(mutex.OwnerInfo{Service: "billing"}))
		h := lockdebug.Handler(newLocker(t, c))
		want := make([]string, 40)
		for i := range want {
			want[i] = fmt.Sprintf("page:%02d", i)
			_, err := holder.Lock(ctx, want[i], mutex.WithTTL(time.Minute))
			require.NoError(t, err)
		}

		t.Run("json", func(t *testing.T) {
			seen := map[string]bool{}
			pages, cursor := 0, ""
			for {
				pages++
				require.Less(t, pages, 2000, "the listing does not end")
				rec := get(t, h, "?all=1&format=json&scans=1&count=2&cursor="+url.QueryEscape(cursor))
				require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
				p := decode(t, rec)
				require.NotNil(t, p.Listing)
				assert.Equal(t, cursor, p.Listing.Cursor)
				for _, in := range p.Listing.Locks {
					seen[in.Key] = true
				}
				if cursor = p.Listing.NextCursor; cursor == "" {
					break
				}
			}
			assert.Greater(t, pages, 1, "small pages")
			assert.Equal(t, want, sortedKeys(seen))
		})

		t.Run("html", func(t *testing.T) {
			seen := map[string]bool{}
			pages, next := 0, "?all=1&scans=1&count=2"
			for next != "" {
				pages++
				require.Less(t, pages, 2000, "the listing does not end")
				rec := get(t, h, next)
				require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
				listing := section(t, rec.Body.String(), "h2", "All locks")
				for _, r := range rows(listing) {
					seen[r["key"]] = true
				}
				next = ""
				if m := nextRe.FindStringSubmatch(listing); m != nil {
					next = html.UnescapeString(m[1])
					require.True(t, strings.HasPrefix(next, "?"), "a link relative to the page: %s", next)
					v, err := url.ParseQuery(next[1:])
					require.NoError(t, err)
					assert.Equal(t, "1", v.Get("scans"), "the page size is kept")
					require.NotEmpty(t, v.Get("cursor"), "the link carries the cursor")
				} else {
					assert.Contains(t, listing, "end of listing")
				}
			}
			assert.Greater(t, pages, 1, "small pages")
			assert.Equal(t, want, sortedKeys(seen))
		})
	})
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// Only GET and HEAD; anything else is 405 with Allow, and lists nothing.
func TestMethodNotAllowed(t *testing.T) {
	c, _ := redistest.Redis(t)
	h := lockdebug.Handler(newLocker(t, c))
	for _, m := range []string{http.MethodPost, http.MethodPut, http.MethodDelete, http.MethodPatch, http.MethodOptions} {
		t.Run(m, func(t *testing.T) {
			rec := do(t, h, m, "?all=1")
			assert.Equal(t, http.StatusMethodNotAllowed, rec.Code)
			assert.Equal(t, "GET, HEAD", rec.Header().Get("Allow"))
			assert.NotContains(t, rec.Body.String(), "<table")
			assertSafeHeaders(t, rec)
		})
	}
	t.Run("HEAD", func(t *testing.T) {
		rec := do(t, h, http.MethodHead, "")
		assert.Equal(t, http.StatusOK, rec.Code)
		assert.Equal(t, "text/html; charset=utf-8", rec.Header().Get("Content-Type"))
		assert.Empty(t, rec.Header().Get("Allow"))
	})
}

// Keys, owner labels and the match pattern come from users: the page
// escapes them; the JSON carries them as they are.
func TestEscaping(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, _ := redistest.Redis(t)
	const key = `<script>alert(1)</script>`
	const label = `say "hi" & 'bye'`
	l := newLocker(t, c, mutex.WithOwnerInfo(mutex.OwnerInfo{Service: "billing", Label: label}))
	_, err := l.Lock(ctx, key, mutex.WithTTL(time.Minute))
	require.NoError(t, err)
	h := lockdebug.Handler(l)

	rec := get(t, h, "?all=1&match="+url.QueryEscape(`<script>*`))
	require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
	body := rec.Body.String()
	assert.NotContains(t, body, "<script", "nothing a user wrote reaches the page as markup")
	assert.NotContains(t, body, label)
	assert.NotContains(t, body, `"hi"`)
	escKey := `&lt;script&gt;alert(1)&lt;/script&gt;`
	assert.Contains(t, section(t, body, "h3", "locker"), `<td class="key">`+escKey+`</td>`, "the held key")
	listing := section(t, body, "h2", "All locks")
	assert.Contains(t, listing, `<td class="key">`+escKey+`</td>`, "the listed key")
	assert.Contains(t, listing, `[say &#34;hi&#34; &amp; &#39;bye&#39;]</td>`, "the owner's label")
	assert.Contains(t, listing, `value="&lt;script&gt;*"`, "the match echoed in the form")
	assert.Contains(t, listing, `<code>&lt;script&gt;*</code>`, "the match echoed")
	assert.Equal(t, "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'", rec.Header().Get("Content-Security-Policy"))

	rec = get(t, h, "?all=1&format=json")
	assert.NotContains(t, rec.Body.String(), "<script", "JSON escapes < too")
	p := decode(t, rec)
	require.Len(t, p.Lockers[0].Held, 1)
	assert.Equal(t, key, p.Lockers[0].Held[0].Key)
	require.NotNil(t, p.Listing)
	require.Len(t, p.Listing.Locks, 1)
	assert.Equal(t, key, p.Listing.Locks[0].Key)
	assert.Equal(t, label, p.Listing.Locks[0].OwnerInfo.Label)
}

// Bad parameters are 400 with the words, in the format asked for; nothing
// is listed.
func TestBadParameters(t *testing.T) {
	c, _ := redistest.Redis(t)
	h := lockdebug.Handler(newLocker(t, c))
	for _, tc := range []struct {
		name, query, words string
	}{
		{"malformed cursor", "all=1&cursor=garbage", `cursor "garbage" is not one List returned`},
		{"cursor past the shards", "all=1&cursor=7:0::x", `names shard 7 of 1`},
		{"match too long", "all=1&match=" + strings.Repeat("a", mutex.MaxKeyLen+1), "match of 4097 bytes exceeds 4096"},
		{"all not a boolean", "all=maybe", `all="maybe": want 1 or 0`},
		{"scans zero", "all=1&scans=0", `scans="0": want a whole number from 1 to 10`},
		{"scans above the default", "all=1&scans=11", `scans="11"`},
		{"count not a number", "all=1&count=lots", `count="lots": want a whole number from 1 to 1000`},
		{"unknown locker", "all=1&locker=nope", `locker "nope": no Locker of that name`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := get(t, h, "?"+tc.query)
			assert.Equal(t, http.StatusBadRequest, rec.Code)
			assertSafeHeaders(t, rec)
			assert.Contains(t, rec.Body.String(), html.EscapeString(tc.words))
			assert.NotContains(t, rec.Body.String(), `<tr class="lock">`)

			rec = get(t, h, "?format=json&"+tc.query)
			assert.Equal(t, http.StatusBadRequest, rec.Code)
			p := decode(t, rec)
			msg := p.Error
			if p.Listing != nil {
				msg += p.Listing.Error
				assert.Empty(t, p.Listing.Locks)
			}
			assert.Contains(t, msg, tc.words)
		})
	}
	t.Run("format", func(t *testing.T) {
		rec := get(t, h, "?format=xml")
		assert.Equal(t, http.StatusBadRequest, rec.Code)
		assert.Contains(t, rec.Body.String(), "format &#34;xml&#34; is neither html nor json")
	})
}

// A listing that Redis cannot serve says so (502) in words; the process's
// own locks are still shown.
func TestListingError(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, srv := redistest.Redis(t)
	l := newLocker(t, c)
	_, err := l.Lock(ctx, "kept", mutex.WithTTL(time.Minute), mutex.WithAutoRenew(false))
	require.NoError(t, err)
	h := lockdebug.Handler(l)
	srv.Kill()

	rec := get(t, h, "?all=1")
	assert.Equal(t, http.StatusBadGateway, rec.Code)
	body := rec.Body.String()
	assert.Contains(t, section(t, body, "h2", "All locks"), `<p class="error">mutex: store unavailable: `)
	assert.Len(t, rows(section(t, body, "h3", "locker")), 1, "the held lock, known locally")

	rec = get(t, h, "?all=1&format=json")
	assert.Equal(t, http.StatusBadGateway, rec.Code)
	p := decode(t, rec)
	require.NotNil(t, p.Listing)
	assert.Contains(t, p.Listing.Error, "mutex: store unavailable")
	assert.Len(t, p.Lockers[0].Held, 1)
}

// A nil Locker, as a failed construction leaves, is shown with its error,
// never a panic; asking it to list is a server error (500).
func TestMisconfiguredLockers(t *testing.T) {
	bad, err := mutex.New(nil)
	require.ErrorIs(t, err, mutex.ErrInvalid)
	h := lockdebug.NamedHandler(lockdebug.Named{Locker: nil}, lockdebug.Named{Name: "bad", Locker: bad})
	rec := get(t, h, "")
	assert.Equal(t, http.StatusOK, rec.Code)
	body := rec.Body.String()
	assert.Contains(t, section(t, body, "h3", "locker 1"), "nil Locker")
	assert.Contains(t, section(t, body, "h3", "bad"), "nil Locker")

	for _, q := range []string{"?all=1", "?all=1&locker=bad"} {
		rec = get(t, h, q+"&format=json")
		assert.Equal(t, http.StatusInternalServerError, rec.Code, q)
		p := decode(t, rec)
		require.NotNil(t, p.Listing)
		assert.Contains(t, p.Listing.Error, "cannot list: admin: redfence: invalid argument: nil Locker", q)
	}

	rec = get(t, lockdebug.Handler(), "")
	assert.Equal(t, http.StatusOK, rec.Code)
	assert.Contains(t, rec.Body.String(), "no Lockers given to the handler")
	rec = get(t, lockdebug.Handler(), "?format=json")
	assert.Contains(t, rec.Body.String(), `"lockers": []`, "a list, never null")
	rec = get(t, lockdebug.Handler(), "?all=1")
	assert.Equal(t, http.StatusBadRequest, rec.Code)
	assert.Contains(t, rec.Body.String(), "no Locker to list with")
}

// assertLeaseLeft checks a page's "lease" cell: a duration above zero and at
// most the lease taken. Read within 5 ms of the acquisition, a minute's
// lease shows as "1m0s" (rounded to 10 ms), so no pattern of seconds alone.
func assertLeaseLeft(t *testing.T, cell string, lease time.Duration) {
	t.Helper()
	d, err := time.ParseDuration(cell)
	if assert.NoError(t, err, "lease %q", cell) {
		assert.Greater(t, d, time.Duration(0), "lease %q", cell)
		assert.LessOrEqual(t, d, lease, "lease %q", cell)
	}
}
