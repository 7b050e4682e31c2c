package pgdriver_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redfence/redfence/mutex"
	"github.com/redfence/redfence/mutex/lockdebug"
)

// TestDebugPageOverPostgres: the debug page over a pgdriver Locker shows
// what it holds itself and, with all=1, the lock another Locker holds, with
// its token, owner and lease, read through the driver's Inspector.
func TestDebugPageOverPostgres(t *testing.T) {
	_, schema := setup(t)
	ctx := t.Context()
	viewer, _, _ := locker(t, schema, "viewer")
	billing, _, _ := locker(t, schema, "billing")
	own, err := viewer.Lock(ctx, "report:1", mutex.WithTTL(time.Minute))
	require.NoError(t, err)
	lk, err := billing.Lock(ctx, "invoice:7", mutex.WithTTL(time.Minute))
	require.NoError(t, err)

	req := httptest.NewRequest(http.MethodGet, "/debug/locks/?all=1&format=json", nil)
	rec := httptest.NewRecorder()
	lockdebug.Handler(viewer).ServeHTTP(rec, req)
	require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
	var page struct {
		Lockers []struct {
			Held []struct {
				Key   string `json:"key"`
				Token int64  `json:"token"`
			} `json:"held"`
		} `json:"lockers"`
		Listing *struct {
			Error string `json:"error"`
			Locks []struct {
				Key     string  `json:"key"`
				State   string  `json:"state"`
				Token   int64   `json:"token"`
				Owner   string  `json:"owner"`
				LeaseMs float64 `json:"lease_ms"`
			} `json:"locks"`
		} `json:"listing"`
	}
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &page), rec.Body.String())
	require.Len(t, page.Lockers, 1)
	require.Len(t, page.Lockers[0].Held, 1)
	assert.Equal(t, "report:1", page.Lockers[0].Held[0].Key)
	assert.Equal(t, own.Token(), page.Lockers[0].Held[0].Token)

	require.NotNil(t, page.Listing)
	require.Empty(t, page.Listing.Error)
	byKey := map[string]int{}
	for i, l := range page.Listing.Locks {
		byKey[l.Key] = i
	}
	require.Contains(t, byKey, "invoice:7", rec.Body.String())
	in := page.Listing.Locks[byKey["invoice:7"]]
	assert.Equal(t, "held", in.State)
	assert.Equal(t, lk.Token(), in.Token)
	assert.NotEmpty(t, in.Owner)
	assert.Greater(t, in.LeaseMs, 0.0)
	assert.LessOrEqual(t, in.LeaseMs, 60000.0)
}
