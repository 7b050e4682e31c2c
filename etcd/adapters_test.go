package etcdlock_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	etcdlock "github.com/redfence/redfence/etcd"
	"github.com/redfence/redfence/etcd/internal/etcdtest"
	httplock "github.com/redfence/redfence/middleware/http"
	"github.com/redfence/redfence/mutex"
	"github.com/redfence/redfence/runner"
)

// httplock and runner keep their data in Redis (shared responses; slot
// claims counted on the Redis server's clock). An etcd Locker lends no
// Redis client, so both refuse it when they are built, saying so, and
// nothing is sent anywhere.
func TestAdaptersThatNeedRedisRefuseEtcd(t *testing.T) {
	s := etcdtest.Start(t)
	be := etcdlock.New(s.Client(t))
	t.Cleanup(func() { assert.NoError(t, be.Close()) })
	l := mutex.NewWithBackend(be)
	t.Cleanup(func() { assert.NoError(t, l.Close()) })
	require.NoError(t, l.Err())
	require.Nil(t, l.Client(), "an etcd Locker lends no Redis client")

	_, err := httplock.New(l)
	assert.ErrorIs(t, err, httplock.ErrNeedsRedis)
	assert.ErrorIs(t, err, httplock.ErrInvalid)
	assert.ErrorContains(t, err, "the Locker lends no Redis client")
	assert.ErrorContains(t, err, "etcd")
	_, err = httplock.NewHandler(http.NotFoundHandler(), l)
	assert.ErrorIs(t, err, httplock.ErrNeedsRedis)

	r := runner.New(l)
	err = r.Add("nightly", time.Hour, func(context.Context, runner.Run) error { return nil })
	assert.ErrorIs(t, err, runner.ErrNeedsRedis)
	assert.ErrorIs(t, err, runner.ErrInvalid)
	assert.ErrorContains(t, err, "the Locker lends no Redis client")
	assert.ErrorContains(t, err, "etcd")
	assert.ErrorIs(t, r.Run(context.Background()), runner.ErrNeedsRedis)
	_, err = r.Last(context.Background(), "nightly")
	assert.ErrorIs(t, err, runner.ErrNeedsRedis)
}
