package lockdebugtest

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redfence/redfence/election"
	"github.com/redfence/redfence/internal/redistest"
	"github.com/redfence/redfence/mutex"
	"github.com/redfence/redfence/mutex/lockdebug"
)

var (
	permitRe = regexp.MustCompile(`(?s)<tr class="permit">(.*?)</tr>`)
	holdRe   = regexp.MustCompile(`(?s)<tr class="hold">(.*?)</tr>`)
)

// cells reads the rows re matches in an HTML fragment, each row's cells'
// text in order.
func cells(re *regexp.Regexp, html string) [][]string {
	var out [][]string
	for _, r := range re.FindAllStringSubmatch(html, -1) {
		var row []string
		for _, c := range cellRe.FindAllStringSubmatch(r[1], -1) {
			row = append(row, text(c[2]))
		}
		out = append(out, row)
	}
	return out
}

// The cluster-wide listing shows an election's lock with its leader's
// host and pid, and a row per permit of a semaphore and per hold of a
// read-write lock with its holder's; the JSON has them under semaphores
// and rwlocks.
func TestListingShowsLeadersPermitsAndHolds(t *testing.T) {
	c, _ := redistest.Redis(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	host, _ := os.Hostname()
	leader := mutex.OwnerInfo{Service: "scheduler", Label: "blue"}
	holder := mutex.OwnerInfo{Service: "exporter"}
	e, err := election.New(newLocker(t, c, mutex.WithOwnerInfo(leader)), "cron")
	require.NoError(t, err)
	term, err := e.Campaign(ctx, "replica-1")
	require.NoError(t, err)
	defer func() { require.NoError(t, term.Release(ctx)) }()
	l := newLocker(t, c, mutex.WithOwnerInfo(holder))
	s, err := mutex.NewSemaphore(l, "exports", 2, mutex.WithTTL(time.Minute))
	require.NoError(t, err)
	p, err := s.Acquire(ctx)
	require.NoError(t, err)
	defer func() { require.NoError(t, p.Release(ctx)) }()
	rw, err := mutex.NewRWMutex(l, "prices", mutex.WithTTL(time.Minute))
	require.NoError(t, err)
	w, err := rw.Lock(ctx)
	require.NoError(t, err)
	defer func() { require.NoError(t, w.Release(ctx)) }()
	h := lockdebug.Handler(newLocker(t, c))

	rec := get(t, h, "?all=1")
	require.Equal(t, http.StatusOK, rec.Code)
	listing := section(t, rec.Body.String(), "h2", "All locks")
	locks := byKey(rows(listing))
	require.Contains(t, locks, "election:cron")
	withHost := func(o mutex.OwnerInfo) mutex.OwnerInfo { o.Host, o.PID = host, os.Getpid(); return o }
	assert.Equal(t, withHost(leader).String(), locks["election:cron"]["owner"], "the leader's host and pid, not its raw id")
	assert.Equal(t, [][]string{{"exports", "1 of 2", strconv.FormatInt(p.Token(), 10), withHost(holder).String()}},
		trimLease(cells(permitRe, listing)))
	assert.Equal(t, [][]string{{"prices", "write", strconv.FormatInt(w.Token(), 10), withHost(holder).String()}},
		trimLease(cells(holdRe, listing)))

	rec = get(t, h, "?all=1&format=json")
	require.Equal(t, http.StatusOK, rec.Code)
	type permit struct {
		Owner     string     `json:"owner"`
		OwnerInfo *jsonOwner `json:"owner_info"`
		Token     int64      `json:"token"`
		LeaseMs   float64    `json:"lease_ms"`
	}
	var pg struct {
		Listing struct {
			Locks      []jsonInfo `json:"locks"`
			Semaphores []struct {
				Key     string   `json:"key"`
				Limit   int      `json:"limit"`
				Holders []permit `json:"holders"`
			} `json:"semaphores"`
			RWLocks []struct {
				Key    string  `json:"key"`
				Writer *permit `json:"writer"`
			} `json:"rwlocks"`
		} `json:"listing"`
	}
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &pg))
	require.Len(t, pg.Listing.Locks, 1)
	assert.Equal(t, &jsonOwner{Service: "scheduler", Host: host, PID: os.Getpid(), Label: "blue"}, pg.Listing.Locks[0].OwnerInfo)
	require.Len(t, pg.Listing.Semaphores, 1)
	assert.Equal(t, "exports", pg.Listing.Semaphores[0].Key)
	assert.Equal(t, 2, pg.Listing.Semaphores[0].Limit)
	require.Len(t, pg.Listing.Semaphores[0].Holders, 1)
	assert.Equal(t, &jsonOwner{Service: "exporter", Host: host, PID: os.Getpid()}, pg.Listing.Semaphores[0].Holders[0].OwnerInfo)
	require.Len(t, pg.Listing.RWLocks, 1)
	require.NotNil(t, pg.Listing.RWLocks[0].Writer)
	assert.Equal(t, w.Token(), pg.Listing.RWLocks[0].Writer.Token)
}

// trimLease drops each row's lease and later cells, which change with the
// clock.
func trimLease(rows [][]string) [][]string {
	for i, r := range rows {
		rows[i] = r[:4]
	}
	return rows
}
