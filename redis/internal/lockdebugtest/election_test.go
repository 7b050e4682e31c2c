package lockdebugtest

import (
	"context"
	"encoding/json"
	"net/http"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redfence/redfence/election"
	"github.com/redfence/redfence/internal/redistest"
	"github.com/redfence/redfence/mutex/lockdebug"
)

var campaignRe = regexp.MustCompile(`(?s)<tr class="campaign">(.*?)</tr>`)

// The Locker's section lists this process's candidates in the elections
// given with it: the term a candidate leads, and a campaign still waiting.
func TestCampaigns(t *testing.T) {
	c, _ := redistest.Redis(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	l := newLocker(t, redis.UniversalClient(c))
	e, err := election.New(l, "scheduler")
	require.NoError(t, err)
	h := lockdebug.NamedHandler(lockdebug.Named{Name: "main", Locker: l, Elections: []*election.Election{e}})

	term, err := e.Campaign(ctx, "replica-1")
	require.NoError(t, err)
	wctx, stop := context.WithCancel(ctx)
	waited := make(chan error)
	go func() { _, err := e.Campaign(wctx, "replica-2"); waited <- err }()
	waitFor(t, ctx, "the second campaign", func() bool { return len(e.Candidacies()) == 2 })

	body := get(t, h, "").Body.String()
	var got [][]string
	for _, r := range campaignRe.FindAllStringSubmatch(section(t, body, "h3", "main"), -1) {
		var cells []string
		for _, c := range cellRe.FindAllStringSubmatch(r[1], -1) {
			cells = append(cells, text(c[2]))
		}
		got = append(got, cells[:3])
	}
	assert.Equal(t, [][]string{
		{"scheduler", "replica-1", strconv.FormatInt(term.Token(), 10)},
		{"scheduler", "replica-2", "campaigning"},
	}, got)

	rec := get(t, h, "?format=json")
	require.Equal(t, http.StatusOK, rec.Code)
	var p struct {
		Lockers []struct {
			Campaigns []struct {
				Election string    `json:"election"`
				Value    string    `json:"value"`
				Term     int64     `json:"term"`
				Since    time.Time `json:"since"`
			} `json:"campaigns"`
		} `json:"lockers"`
	}
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &p))
	require.Len(t, p.Lockers[0].Campaigns, 2)
	assert.Equal(t, term.Token(), p.Lockers[0].Campaigns[0].Term)
	assert.True(t, term.Since().Equal(p.Lockers[0].Campaigns[0].Since))
	assert.Zero(t, p.Lockers[0].Campaigns[1].Term)

	stop()
	require.Error(t, <-waited)
	require.NoError(t, term.Release(ctx))
	assert.NotContains(t, get(t, h, "").Body.String(), `class="campaign"`)
}
