package lockdebugtest

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redfence/redfence/internal/redistest"
	"github.com/redfence/redfence/mutex"
	"github.com/redfence/redfence/mutex/lockdebug"
)

// The page lists the process's permits beside its locks, marked as
// permits, with their tokens; the JSON says permit only for them.
func TestThisProcessPermits(t *testing.T) {
	c, _ := redistest.Redis(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	l := newLocker(t, c)
	h := lockdebug.NamedHandler(lockdebug.Named{Name: "exports", Locker: l})
	s, err := mutex.NewSemaphore(l, "exports", 2)
	require.NoError(t, err)
	p, err := s.Acquire(ctx)
	require.NoError(t, err)
	lk, err := l.Lock(ctx, "job")
	require.NoError(t, err)

	rec := get(t, h, "")
	require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
	assert.Contains(t, rec.Body.String(), "exports <span class=\"meta\" title=\"a permit of the semaphore of this name\">(permit)</span>")

	rec = get(t, h, "?format=json")
	var page struct {
		Lockers []struct {
			Held []struct {
				Key    string `json:"key"`
				Token  int64  `json:"token"`
				Permit *bool  `json:"permit"`
			} `json:"held"`
		} `json:"lockers"`
	}
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &page), rec.Body.String())
	require.Len(t, page.Lockers, 1)
	held := page.Lockers[0].Held
	require.Len(t, held, 2)
	assert.Equal(t, "exports", held[0].Key)
	assert.Equal(t, p.Token(), held[0].Token)
	require.NotNil(t, held[0].Permit)
	assert.True(t, *held[0].Permit)
	assert.Equal(t, lk.Token(), held[1].Token)
	assert.Nil(t, held[1].Permit, "a lock's row has no permit field")
}

// The page marks the holds of read-write locks, read or write, with their
// tokens; the JSON says rw only for them.
func TestThisProcessRWHolds(t *testing.T) {
	c, _ := redistest.Redis(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	l := newLocker(t, c)
	h := lockdebug.NamedHandler(lockdebug.Named{Name: "books", Locker: l})
	books, err := mutex.NewRWMutex(l, "books")
	require.NoError(t, err)
	w, err := books.Lock(ctx)
	require.NoError(t, err)
	shelf, err := mutex.NewRWMutex(l, "shelf")
	require.NoError(t, err)
	r, err := shelf.RLock(ctx)
	require.NoError(t, err)
	lk, err := l.Lock(ctx, "zjob")
	require.NoError(t, err)

	rec := get(t, h, "")
	require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
	assert.Contains(t, rec.Body.String(), "books <span class=\"meta\" title=\"a hold of the read-write lock of this name\">(write)</span>")
	assert.Contains(t, rec.Body.String(), "shelf <span class=\"meta\" title=\"a hold of the read-write lock of this name\">(read)</span>")

	rec = get(t, h, "?format=json")
	var page struct {
		Lockers []struct {
			Held []struct {
				Key   string  `json:"key"`
				Token int64   `json:"token"`
				RW    *string `json:"rw"`
			} `json:"held"`
		} `json:"lockers"`
	}
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &page), rec.Body.String())
	require.Len(t, page.Lockers, 1)
	held := page.Lockers[0].Held
	require.Len(t, held, 3)
	require.NotNil(t, held[0].RW)
	assert.Equal(t, "write", *held[0].RW)
	assert.Equal(t, w.Token(), held[0].Token)
	require.NotNil(t, held[1].RW)
	assert.Equal(t, "read", *held[1].RW)
	assert.Equal(t, r.Token(), held[1].Token)
	assert.Equal(t, lk.Token(), held[2].Token)
	assert.Nil(t, held[2].RW, "a lock's row has no rw field")
}
