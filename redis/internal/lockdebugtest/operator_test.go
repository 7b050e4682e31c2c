package lockdebugtest

import (
	"context"
	"net/http"
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

// A Redlock listing that no quorum answers is an error (502), never an
// empty listing; one a quorum answers, but not every node, is shown with a
// banner and complete=false.
func TestRedlockListingOnThePage(t *testing.T) {
	_, srvs := redistest.RedisN(t, 3)
	clients := make([]redis.UniversalClient, len(srvs))
	for i, s := range srvs {
		// A refused node fails at once, not after go-redis's retries.
		c := redis.NewClient(&redis.Options{Addr: s.Addr(), DialTimeout: 200 * time.Millisecond, MaxRetries: -1, ContextTimeoutEnabled: true})
		t.Cleanup(func() { _ = c.Close() })
		clients[i] = c
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rl := redistest.Redlock(t, clients)
	_, err := rl.Lock(ctx, "batch", mutex.WithTTL(time.Minute))
	require.NoError(t, err)
	viewer := redistest.Redlock(t, clients)
	h := lockdebug.Handler(viewer)
	// (Lock returns at the quorum: the last node may still be granting.)
	waitFor(t, ctx, "every node holds the lock", func() bool {
		n := 0
		for _, c := range clients {
			if c.Exists(ctx, "redfence:{batch}").Val() == 1 {
				n++
			}
		}
		return n == 3
	})

	srvs[2].Kill()
	rec := get(t, h, "?all=1")
	require.Equal(t, http.StatusOK, rec.Code)
	listing := section(t, rec.Body.String(), "h2", "All locks")
	assert.Contains(t, listing, `<p class="error partial">partial listing: `)
	assert.Contains(t, listing, srvs[2].Addr())
	assert.Len(t, rows(listing), 1, "what the majority holds is listed")
	p := decode(t, get(t, h, "?all=1&format=json"))
	require.NotNil(t, p.Listing)
	assert.Equal(t, 2, p.Schema)
	assert.False(t, p.Listing.Complete)
	assert.NotEmpty(t, p.Listing.Skipped)
	require.Len(t, p.Listing.Locks, 1)
	require.NotNil(t, p.Listing.Locks[0].NoQueue, "an empty waiters list over Redlock says nothing: no_queue says so")
	assert.Contains(t, *p.Listing.Locks[0].NoQueue, "no queue")

	for _, s := range srvs[:2] {
		s.Kill()
		rec := get(t, h, "?all=1")
		assert.Equal(t, http.StatusBadGateway, rec.Code)
		listing := section(t, rec.Body.String(), "h2", "All locks")
		assert.Contains(t, listing, "nodes answered, 2 needed")
		assert.Empty(t, rows(listing))
		assert.NotContains(t, listing, "no locks on this page")
		p := decode(t, get(t, h, "?all=1&format=json"))
		require.NotNil(t, p.Listing)
		assert.Contains(t, p.Listing.Error, "nodes answered, 2 needed")
		assert.False(t, p.Listing.Complete)
	}
}

// Keys are anyone's bytes: control and bidirectional characters, and
// bytes that are not UTF-8, show as escapes, in the held rows and in the
// listing; JSON keeps the exact key.
func TestPageMakesKeysVisible(t *testing.T) {
	c, _ := redistest.Redis(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	l := newLocker(t, c)
	keys := map[string]string{
		"rtl\u202eevil":   `&#34;rtl\u202eevil&#34;`,
		"esc\x1b[2Jbel\a": `&#34;esc\x1b[2Jbel\a&#34;`,
		"bin\xff\xfe":     `&#34;bin\xff\xfe&#34;`,
	}
	for key := range keys {
		_, err := l.Lock(ctx, key, mutex.WithTTL(time.Minute))
		require.NoError(t, err)
	}
	body := get(t, lockdebug.Handler(l), "?all=1").Body.String()
	for _, bad := range []string{"\u202e", "\x1b", "\a", "\xff"} {
		assert.NotContains(t, body, bad)
	}
	for _, part := range []string{section(t, body, "h3", "locker"), section(t, body, "h2", "All locks")} {
		for key, shown := range keys {
			assert.Contains(t, part, `<td class="key">`+shown+`</td>`, "%q", key)
		}
	}
	p := decode(t, get(t, lockdebug.Handler(l), "?all=1&format=json"))
	require.NotNil(t, p.Listing)
	assert.Len(t, p.Listing.Locks, len(keys))
	for _, h := range p.Lockers[0].Held {
		if h.Key == "rtl\u202eevil" {
			return // the exact key, in JSON
		}
	}
	t.Error("JSON does not carry the exact key")
}

// An oversize parameter is refused without being sent back: not in the
// error, the form or the links.
func TestOversizeParametersAreNotEchoed(t *testing.T) {
	c, _ := redistest.Redis(t)
	h := lockdebug.Handler(newLocker(t, c))
	for name, query := range map[string]string{
		"match":  "all=1&match=" + strings.Repeat("m", 900<<10),
		"cursor": "all=1&cursor=" + strings.Repeat("c", 500<<10),
		"locker": "all=1&locker=" + strings.Repeat("l", 500<<10),
		"format": "format=" + strings.Repeat("f", 500<<10),
	} {
		t.Run(name, func(t *testing.T) {
			for _, format := range []string{"", "&format=json"} {
				rec := get(t, h, "?"+query+format)
				assert.Equal(t, http.StatusBadRequest, rec.Code)
				assert.Less(t, rec.Body.Len(), 16<<10, "the body is the page, not the parameter")
			}
		})
	}
}
