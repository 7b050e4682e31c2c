package chaoskit

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// outcomes is a Resolver that answers from a script: errs first (the
// store down), then its verdict on every op.
type outcomes struct {
	Register
	errs      int
	read      int64
	committed bool
	asked     []string
}

func (o *outcomes) Outcome(_ context.Context, op string) (int64, bool, error) {
	o.asked = append(o.asked, op)
	if o.errs > 0 {
		o.errs--
		return 0, false, errors.New("store down")
	}
	return o.read, o.committed, nil
}

// TestResolve: a write of unknown outcome that committed joins the history
// with what it read, its call, and a return at or after its call; one that
// did not commit leaves no trace; errors from the store are retried.
func TestResolve(t *testing.T) {
	res := &outcomes{errs: 2, read: 41, committed: true}
	w := New(t, res, Config{})
	w.resolve(t.Context(), 3, 1000, "tx:3:7")
	assert.Equal(t, []string{"tx:3:7", "tx:3:7", "tx:3:7"}, res.asked)
	require.Len(t, w.history, 1)
	h := w.history[0]
	assert.Equal(t, 3, h.ClientId)
	assert.Equal(t, int64(1000), h.Call)
	assert.GreaterOrEqual(t, h.Return, h.Call)
	assert.Equal(t, rmw{41}, h.Output)
	assert.Equal(t, int64(1), w.unknownC.Load())

	res.committed = false
	w.resolve(t.Context(), 2, 2000, LockOp(12))
	assert.Equal(t, "lock:12", res.asked[len(res.asked)-1])
	assert.Len(t, w.history, 1, "a write that did not commit had no effect")
	assert.Equal(t, int64(2), w.unknown.Load())
}
