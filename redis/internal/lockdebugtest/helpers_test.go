package lockdebugtest

import (
	"context"
	"encoding/json"
	"html"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redfence/redfence/internal/redistest"
	"github.com/redfence/redfence/mutex"
	"github.com/redfence/redfence/mutex/admin"
)

// eachDeployment runs fn against a standalone redis-server and a 3-master
// Cluster, each private to the subtest.
func eachDeployment(t *testing.T, fn func(t *testing.T, c redis.UniversalClient)) {
	t.Run("standalone", func(t *testing.T) {
		c, _ := redistest.Redis(t)
		fn(t, c)
	})
	t.Run("cluster", func(t *testing.T) {
		fn(t, redistest.RedisCluster(t, 3).Client)
	})
}

func newLocker(t *testing.T, c redis.UniversalClient, opts ...mutex.Option) *mutex.Locker {
	t.Helper()
	return redistest.Locker(t, c, toAny(opts)...)
}

// operator is the admin.Admin over l, what the page reads through.
func operator(t *testing.T, l *mutex.Locker) *admin.Admin {
	t.Helper()
	a, err := admin.New(l)
	require.NoError(t, err)
	return a
}

func toAny(opts []mutex.Option) []any {
	out := make([]any, len(opts))
	for i, o := range opts {
		out[i] = o
	}
	return out
}

// waitFor polls cond until it holds or ctx ends.
func waitFor(t *testing.T, ctx context.Context, what string, cond func() bool) {
	t.Helper()
	for !cond() {
		select {
		case <-ctx.Done():
			t.Fatalf("%s: %v", what, ctx.Err())
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// waitInLock starts a goroutine that waits in l.Lock(key) until the test
// ends: then its Lock gives up, and the cleanup waits for it.
func waitInLock(t *testing.T, l *mutex.Locker, key string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		lk, err := l.Lock(ctx, key)
		if err == nil {
			_ = lk.Release(context.Background())
		}
	}()
	t.Cleanup(func() { cancel(); <-done })
}

const base = "/debug/locks/"

// get serves one request to h.
func get(t *testing.T, h http.Handler, query string, header ...string) *httptest.ResponseRecorder {
	t.Helper()
	return do(t, h, http.MethodGet, query, header...)
}

func do(t *testing.T, h http.Handler, method, query string, header ...string) *httptest.ResponseRecorder {
	t.Helper()
	req := httptest.NewRequest(method, base+query, nil)
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

// assertSafeHeaders checks the headers every answer carries.
func assertSafeHeaders(t *testing.T, rec *httptest.ResponseRecorder) {
	t.Helper()
	assert.Equal(t, "no-store", rec.Header().Get("Cache-Control"))
	assert.Equal(t, "nosniff", rec.Header().Get("X-Content-Type-Options"))
}

func decode(t *testing.T, rec *httptest.ResponseRecorder) jsonPage {
	t.Helper()
	assert.Equal(t, "application/json", rec.Header().Get("Content-Type"))
	var p jsonPage
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &p), rec.Body.String())
	return p
}

// The JSON form as a client reads it: the field names are the contract.
type jsonPage struct {
	Schema  int       `json:"schema"`
	Time    time.Time `json:"time"`
	Host    string    `json:"host"`
	PID     int       `json:"pid"`
	Error   string    `json:"error"`
	Lockers []struct {
		Name      string `json:"name"`
		Error     string `json:"error"`
		HeldTotal int    `json:"held_total"`
		Held      []struct {
			Key         string    `json:"key"`
			Token       int64     `json:"token"`
			Acquired    time.Time `json:"acquired"`
			HeldMs      float64   `json:"held_ms"`
			LeaseMs     float64   `json:"lease_ms"`
			TTLMs       float64   `json:"ttl_ms"`
			Count       int       `json:"count"`
			AutoRenew   bool      `json:"auto_renew"`
			Renewals    int       `json:"renewals"`
			LastRenewal float64   `json:"last_renewal_ms"`
			Waiters     int       `json:"local_waiters"`
		} `json:"held"`
	} `json:"lockers"`
	Listing *struct {
		Locker     string     `json:"locker"`
		Match      string     `json:"match"`
		Cursor     string     `json:"cursor"`
		NextCursor string     `json:"next_cursor"`
		RoundTrips int        `json:"round_trips"`
		Error      string     `json:"error"`
		Schema     int        `json:"schema"`
		Complete   bool       `json:"complete"`
		Skipped    []string   `json:"skipped"`
		Locks      []jsonInfo `json:"locks"`
	} `json:"listing"`
}

type jsonInfo struct {
	Key        string     `json:"key"`
	State      string     `json:"state"`
	Token      int64      `json:"token"`
	Owner      string     `json:"owner"`
	OwnerInfo  *jsonOwner `json:"owner_info"`
	Count      int        `json:"count"`
	AcquiredAt time.Time  `json:"acquired_at"`
	RenewedAt  time.Time  `json:"renewed_at"`
	HeldMs     *float64   `json:"held_ms"`
	LeaseMs    float64    `json:"lease_ms"`
	ServerTime time.Time  `json:"server_time"`
	NoQueue    *string    `json:"no_queue"`
	Waiters    []struct {
		Locker    string     `json:"locker"`
		OwnerInfo *jsonOwner `json:"owner_info"`
		Since     time.Time  `json:"since"`
		WaitedMs  float64    `json:"waited_ms"`
	} `json:"waiters"`
}

type jsonOwner struct {
	Service string `json:"service"`
	Host    string `json:"host"`
	PID     int    `json:"pid"`
	Label   string `json:"label"`
}

var (
	rowRe  = regexp.MustCompile(`(?s)<tr class="lock">(.*?)</tr>`)
	cellRe = regexp.MustCompile(`(?s)<td class="([^"]*)"[^>]*>(.*?)</td>`)
	tagRe  = regexp.MustCompile(`<[^>]*>`)
	nextRe = regexp.MustCompile(`<a class="next" href="([^"]*)">`)
)

// section is the part of an HTML page from the heading that starts with
// title to the next heading of that level or higher.
func section(t *testing.T, body, tag, title string) string {
	t.Helper()
	start := strings.Index(body, "<"+tag+">"+title)
	require.GreaterOrEqual(t, start, 0, "no <%s>%s in the page:\n%s", tag, title, body)
	rest := body[start+len(tag)+2:]
	end := len(rest)
	for _, stop := range []string{"<h2>", "<" + tag + ">"} {
		if i := strings.Index(rest, stop); i >= 0 && i < end {
			end = i
		}
	}
	return rest[:end]
}

// rows reads the lock rows of an HTML fragment: by row, cell name (its
// last class, "state" for the state cell) to its text.
func rows(html string) []map[string]string {
	var out []map[string]string
	for _, r := range rowRe.FindAllStringSubmatch(html, -1) {
		row := map[string]string{}
		for _, c := range cellRe.FindAllStringSubmatch(r[1], -1) {
			classes := strings.Fields(c[1])
			name := classes[len(classes)-1]
			if classes[0] == "state" {
				name = "state"
			}
			row[name] = text(c[2])
		}
		out = append(out, row)
	}
	return out
}

func text(s string) string {
	return strings.TrimSpace(html.UnescapeString(tagRe.ReplaceAllString(s, "")))
}

// byKey indexes rows by their key cell.
func byKey(rs []map[string]string) map[string]map[string]string {
	out := map[string]map[string]string{}
	for _, r := range rs {
		out[r["key"]] = r
	}
	return out
}
