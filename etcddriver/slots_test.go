package etcddriver_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"

	etcddriver "github.com/redfence/redfence/etcddriver"
	"github.com/redfence/redfence/mutex/backend"
)

// claimer makes claims of one Driver, failing the test on an error.
type claimer struct {
	t   *testing.T
	b   *etcddriver.Driver
	ctx context.Context
}

func (c claimer) claim(key string, slot int64, who string, gap time.Duration) bool {
	c.t.Helper()
	ok, err := c.b.ClaimSlot(c.ctx, backend.SlotClaim{Key: key, Slot: slot, Claimer: who, TTL: time.Minute, Gap: gap})
	require.NoError(c.t, err)
	return ok
}

// A slot is claimed once, never after a higher one, in numeric order
// whatever the sign or the number of digits; a claimer's retry finds its
// own claim. The keys stay out of List.
func TestClaimSlotOrder(t *testing.T) {
	b, cli := driver(t, server(t))
	ctx := testCtx(t)
	c := claimer{t, b, ctx}
	assert.True(t, c.claim("k", 5, "a", 0))
	assert.False(t, c.claim("k", 5, "b", 0), "a slot is claimed once")
	assert.True(t, c.claim("k", 5, "a", 0), "a retry of the claimer finds its claim")
	assert.False(t, c.claim("k", 4, "b", 0), "never a lower slot after a higher one")
	assert.True(t, c.claim("k", 6, "b", 0))
	assert.False(t, c.claim("k", 5, "a", 0), "a claimer's slot passed is no longer its")

	for i, slot := range []int64{-1 << 40, -3, -1, 0, 9, 10, 255, 256, 1 << 40} {
		assert.True(t, c.claim("n", slot, "a", 0), "slot %d after a lower one", slot)
		if i > 0 {
			assert.False(t, c.claim("n", slot-1, "b", 0), "slot %d after %d", slot-1, slot)
		}
	}

	page, err := b.List(ctx, backend.ListRequest{Count: 100})
	require.NoError(t, err)
	assert.Empty(t, page.Keys, "claims are no locks")
	// The claim lasts its TTL (a minute) from the call at least.
	r, err := cli.Get(ctx, etcddriver.ClaimKey("k"))
	require.NoError(t, err)
	require.Len(t, r.Kvs, 1)
	ttl, err := cli.TimeToLive(ctx, clientv3.LeaseID(r.Kvs[0].Lease))
	require.NoError(t, err)
	assert.GreaterOrEqual(t, ttl.TTL, int64(59), "the claim's lease")
}

// A claim with a gap of a second or more refuses the next claims until the
// gap's lease ends on the leader; a shorter gap is none.
func TestClaimSlotGap(t *testing.T) {
	b, _ := driver(t, server(t))
	ctx := testCtx(t)
	c := claimer{t, b, ctx}
	assert.True(t, c.claim("g", 1, "a", 2*time.Second))
	assert.False(t, c.claim("g", 2, "b", 2*time.Second), "the gap is closed")
	assert.True(t, c.claim("g", 1, "a", 2*time.Second), "a retry of the claimer finds its claim")
	require.Eventually(t, func() bool { return c.claim("g", 2, "b", 0) }, 20*time.Second, 20*time.Millisecond,
		"the gap opens once its lease ends")

	assert.True(t, c.claim("s", 1, "a", 999*time.Millisecond))
	assert.True(t, c.claim("s", 2, "b", 999*time.Millisecond), "under a second, the gap is none")
}

// leastTTL is a client of a server whose least lease TTL is least seconds:
// it raises grants to that, as etcd raises them to its own.
type leastTTL struct {
	*clientv3.Client
	least int64
}

func (c leastTTL) Grant(ctx context.Context, ttl int64) (*clientv3.LeaseGrantResponse, error) {
	return c.Client.Grant(ctx, max(ttl, c.least))
}

// A gap the server would lengthen to its least TTL is left out: held that
// long, it would refuse claims the runner is owed.
func TestClaimSlotGapUnderTheLeastTTL(t *testing.T) {
	cli := server(t).Client(t)
	b := driverOn(t, leastTTL{cli, 5})
	c := claimer{t, b, testCtx(t)}
	for slot := range int64(3) {
		assert.True(t, c.claim("m", slot, "a", 2*time.Second), "slot %d: no gap", slot)
	}
}

// Records are kept a TTL at least, read back, and outlive a kept lease that
// disappeared (revoked by someone else): the next write takes a new one.
func TestRecords(t *testing.T) {
	b, cli := driver(t, server(t))
	ctx := testCtx(t)
	_, found, err := b.GetRecord(ctx, "r")
	require.NoError(t, err)
	assert.False(t, found)
	require.NoError(t, b.PutRecord(ctx, "r", []byte("one"), time.Hour))
	got, found, err := b.GetRecord(ctx, "r")
	require.NoError(t, err)
	assert.True(t, found)
	assert.Equal(t, "one", string(got))

	r, err := cli.Get(ctx, etcddriver.RecordKey("r"))
	require.NoError(t, err)
	require.Len(t, r.Kvs, 1)
	id := clientv3.LeaseID(r.Kvs[0].Lease)
	ttl, err := cli.TimeToLive(ctx, id)
	require.NoError(t, err)
	assert.GreaterOrEqual(t, ttl.TTL, int64(3599), "the record's lease")

	_, err = cli.Revoke(ctx, id)
	require.NoError(t, err)
	_, found, err = b.GetRecord(ctx, "r")
	require.NoError(t, err)
	assert.False(t, found, "gone with its lease")
	require.NoError(t, b.PutRecord(ctx, "r", []byte("two"), time.Hour))
	got, _, err = b.GetRecord(ctx, "r")
	require.NoError(t, err)
	assert.Equal(t, "two", string(got))

	page, err := b.List(ctx, backend.ListRequest{Count: 100})
	require.NoError(t, err)
	assert.Empty(t, page.Keys, "records are no locks")
}

// Close leaves the claims and records to their leases: the other replicas
// rely on them. Later calls fail with ErrClosed, sending nothing.
func TestSlotDataOutlivesClose(t *testing.T) {
	c := server(t)
	cli := c.Client(t)
	b, err := etcddriver.New(cli)
	require.NoError(t, err)
	ctx := testCtx(t)
	ok, err := b.ClaimSlot(ctx, backend.SlotClaim{Key: "k", Slot: 1, Claimer: "a", TTL: time.Minute})
	require.NoError(t, err)
	require.True(t, ok)
	require.NoError(t, b.PutRecord(ctx, "r", []byte("x"), time.Minute))
	require.NoError(t, b.Close())

	for _, key := range []string{etcddriver.ClaimKey("k"), etcddriver.RecordKey("r")} {
		r, err := cli.Get(ctx, key)
		require.NoError(t, err)
		assert.Len(t, r.Kvs, 1, "%q outlived Close", key)
	}
	_, err = b.ClaimSlot(ctx, backend.SlotClaim{Key: "k", Slot: 2, Claimer: "a", TTL: time.Minute})
	assert.ErrorIs(t, err, etcddriver.ErrClosed)
	assert.ErrorIs(t, b.PutRecord(ctx, "r", nil, time.Minute), etcddriver.ErrClosed)
	_, _, err = b.GetRecord(ctx, "r")
	assert.ErrorIs(t, err, etcddriver.ErrClosed)
}
