package respcapture

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestReplayKeepsTrailers: a trailer the handler declared and set after its
// body reaches the client with the replayed response.
func TestReplayKeepsTrailers(t *testing.T) {
	rec := httptest.NewRecorder()
	c := New(rec, &Config{Max: 1 << 10})
	c.Header().Set("Trailer", "X-Sum")
	c.Header().Set("Content-Type", "text/plain")
	_, err := c.Write([]byte("hello"))
	require.NoError(t, err)
	c.Header().Set("X-Sum", "5")
	assert.Zero(t, rec.Body.Len(), "nothing reaches the client before Replay")
	c.Replay()
	res := rec.Result()
	assert.Equal(t, "hello", rec.Body.String())
	assert.Equal(t, "5", res.Trailer.Get("X-Sum"))
	assert.Equal(t, "text/plain", res.Header.Get("Content-Type"))
}

// TestLostBeforeTheClient: a response past Max is given up, Lost called
// before any byte reaches the client, and the rest written through.
func TestLostBeforeTheClient(t *testing.T) {
	rec := httptest.NewRecorder()
	lost := 0
	c := New(rec, &Config{Max: 4, Lost: func() {
		assert.Zero(t, rec.Body.Len(), "Lost comes first")
		lost++
	}})
	_, _ = c.Write([]byte("abc"))
	_, _ = c.Write([]byte("def"))
	c.Flush()
	assert.Equal(t, 1, lost, "once")
	assert.Equal(t, "oversize", c.Reason(), "the first reason is kept")
	assert.Equal(t, "abcdef", rec.Body.String())
	assert.True(t, c.Through())
}

// TestRefuseAtTheStatusLine: a status the middleware refuses goes through
// at once.
func TestRefuseAtTheStatusLine(t *testing.T) {
	rec := httptest.NewRecorder()
	c := New(rec, &Config{Max: 1 << 10, Refuse: func(status int, _ http.Header) string {
		if status == http.StatusTeapot {
			return "status"
		}
		return ""
	}})
	c.WriteHeader(http.StatusTeapot)
	assert.Equal(t, http.StatusTeapot, rec.Code)
	assert.True(t, rec.Flushed || c.Through())
	assert.Equal(t, "status", c.Reason())
}

type failing struct{ *httptest.ResponseRecorder }

var errGone = errors.New("client gone")

func (failing) Write([]byte) (int, error) { return 0, errGone }

// TestQuiet: with Quiet a failed write to the client is not the handler's
// error; without it, it is. ClientErr keeps the first either way.
func TestQuiet(t *testing.T) {
	for _, quiet := range []bool{true, false} {
		c := New(failing{httptest.NewRecorder()}, &Config{Max: 0, Quiet: quiet})
		n, err := c.Write([]byte("x"))
		if quiet {
			assert.NoError(t, err)
			assert.Equal(t, 1, n)
		} else {
			assert.ErrorIs(t, err, errGone)
		}
		assert.ErrorIs(t, c.ClientErr(), errGone)
	}
}
