package asynqlock_test

import (
	"context"
	"testing"

	"github.com/hibiken/asynq"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/redfence/redfence/internal/redistest"
	"github.com/redfence/redfence/mutex/admin"
	asynqlock "github.com/redfence/redfence/redis/asynqlock"
)

// A task of several keys (WithKeys) names them on its span: redfence.keys,
// how many (as mutex's LockAll span says it), redfence.asynqlock.keys, the
// keys as the task named them, prefixed and deduplicated, and, once held,
// redfence.asynqlock.tokens, each key's token in that order (the ones the
// handler sees through KeyToken), and no one-key redfence.key or
// redfence.token. A busy task names its keys and no tokens; a one-key
// task keeps redfence.key and redfence.token.
func TestTelemetryKeys(t *testing.T) {
	c, _ := redistest.Redis(t)
	l := redistest.Locker(t, c)
	other := redistest.Locker(t, c)
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	tel := asynqlock.WithTracerProvider(tp)
	ctx := context.Background()

	// b's token counter far ahead of the clock (a released key keeps only
	// "<token>", acquire.lua), so that the keys' tokens differ and their
	// order on the span shows.
	a, err := admin.New(l)
	require.NoError(t, err)
	info, err := a.Inspect(ctx, "asynq:account:b")
	require.NoError(t, err)
	require.NoError(t, c.Set(ctx, info.Name, "9000000000000000", 0).Err())
	var seen []int64
	record := func(ctx context.Context, _ *asynq.Task) error {
		for _, k := range []string{"account:b", "account:a"} {
			tok, _ := asynqlock.KeyToken(ctx, k)
			seen = append(seen, tok)
		}
		return nil
	}
	require.NoError(t, processKeys(t, l, []string{"account:b", "account:a", "account:b"}, record, tel))
	require.Equal(t, []int64{9000000000000001}, seen[:1], "b's token follows its counter")

	lk, err := other.Lock(ctx, "asynq:account:a")
	require.NoError(t, err)
	require.ErrorIs(t, processKeys(t, l, []string{"account:b", "account:a"}, ok, tel), asynqlock.ErrLocked)
	require.NoError(t, lk.Release(ctx))
	require.NoError(t, process(t, l, "account:c", ok, tel))

	spans := rec.Ended()
	require.Len(t, spans, 3)
	attrs := make([]map[string]any, len(spans))
	for i, s := range spans {
		attrs[i] = map[string]any{}
		for _, kv := range s.Attributes() {
			attrs[i][string(kv.Key)] = kv.Value.AsInterface()
		}
	}
	keys := []string{"asynq:account:b", "asynq:account:a"}
	held, busy, one := attrs[0], attrs[1], attrs[2]
	assert.Equal(t, "ok", held["redfence.outcome"])
	assert.Equal(t, int64(2), held["redfence.keys"], "how many keys, duplicates once")
	assert.Equal(t, keys, held["redfence.asynqlock.keys"], "the keys, in the task's order")
	assert.Equal(t, seen, held["redfence.asynqlock.tokens"], "each key's token, in the keys' order")
	assert.NotContains(t, held, "redfence.key")
	assert.NotContains(t, held, "redfence.token")

	assert.Equal(t, "locked", busy["redfence.outcome"])
	assert.Equal(t, int64(2), busy["redfence.keys"])
	assert.Equal(t, keys, busy["redfence.asynqlock.keys"])
	assert.NotContains(t, busy, "redfence.asynqlock.tokens", "a busy task holds no tokens")

	assert.Equal(t, "asynq:account:c", one["redfence.key"])
	assert.IsType(t, int64(0), one["redfence.token"])
	assert.NotContains(t, one, "redfence.keys")
	assert.NotContains(t, one, "redfence.asynqlock.keys")
	assert.NotContains(t, one, "redfence.asynqlock.tokens")
}
