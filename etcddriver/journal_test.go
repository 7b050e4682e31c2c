package etcddriver_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/redfence/redfence/election"
	"github.com/redfence/redfence/internal/etcdtest"
	"github.com/redfence/redfence/internal/journaltest"
	"github.com/redfence/redfence/mutex/backend"
)

// The journal keeps its contract (journaltest), and its keys are not
// listed as locks.
func TestTermJournal(t *testing.T) {
	b, cli := driver(t, server(t))
	ctx := testCtx(t)
	journaltest.Run(ctx, t, b, "election:j")

	page, err := b.List(ctx, backend.ListRequest{Count: 100, Scans: 1})
	require.NoError(t, err)
	assert.Empty(t, page.Keys, "journal keys are not locks")
	r, err := cli.Get(ctx, testPrefix+"election:j", clientv3.WithPrefix(), clientv3.WithCountOnly())
	require.NoError(t, err)
	assert.Positive(t, r.Count, "the journal is beside the lock key, under the Driver's prefix")
}

// An election over etcd journals its terms: an observer sees every one
// in order, and another process reads the leader's value.
func TestElectionOnEtcd(t *testing.T) {
	onEach(t, func(t *testing.T, c *etcdtest.Cluster) {
		ctx := testCtx(t)
		elect := func() *election.Election {
			b, _ := driver(t, c)
			l := lockerOn(t, b)
			e, err := election.New(l, "etcd", election.WithTTL(2*time.Second),
				election.WithRenewDeadline(1500*time.Millisecond), election.WithRetryPeriod(200*time.Millisecond))
			require.NoError(t, err)
			return e
		}
		a, watcher := elect(), elect()
		first, err := a.Campaign(ctx, "a")
		require.NoError(t, err)
		octx, stop := context.WithCancel(ctx)
		defer stop()
		seen := watcher.Observe(octx)
		require.Equal(t, first.Token(), (<-seen).Term)
		ld, err := watcher.Leader(ctx)
		require.NoError(t, err)
		assert.Equal(t, election.Leader{Value: "a", Term: first.Token(), Since: first.Since()}, ld)
		require.NoError(t, first.Release(ctx))

		var issued []int64
		for range 10 {
			term, err := a.Campaign(ctx, "a")
			require.NoError(t, err)
			issued = append(issued, term.Token())
			require.NoError(t, term.Release(ctx))
		}
		for i, want := range issued {
			require.Equal(t, want, (<-seen).Term, "term %d", i)
		}
		stop()
		for range seen {
		}
	})
}
