package redlockdriver

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// A Redlock node that stopped answering is not asked at every attempt: each
// would send it a call that waits the node timeout, then a clean-up and a
// late release that wait as long, for a vote that never comes, and those
// calls take CPU and connections from the healthy quorum's (bench/README.md:
// a paused master). When a call to a node is still out at the node timeout,
// or fails to reach it, the node rests: attempts count it as a refusal
// without asking, for 100 ms, doubling with every failure that follows up to
// a second. The first attempt after the rest asks it again (the others go on
// skipping it for another rest while that probe is out), and an answer
// within the node timeout ends the rest. Safety is unchanged (a resting
// node's vote counts as a no, as a timeout's does), and an attempt never
// rests so many nodes that fewer than a quorum would be asked: then it asks
// every node, as if none rested.
const (
	nodeRestMin = 100 * time.Millisecond
	nodeRestMax = time.Second
	// maxRestFailures caps the failure count: past it every rest is
	// nodeRestMax anyway, and the count must not wrap.
	maxRestFailures = 8
)

// nodeRest is one node's state.
type nodeRest struct {
	failures atomic.Int32 // failed calls in a row, at most maxRestFailures
	until    atomic.Int64 // not asked before: ns since the Driver's restEpoch, plus 1; 0 when healthy
}

// restFor is the rest after failures in a row (at most maxRestFailures, so
// the shift stays far from overflowing).
func restFor(failures int32) time.Duration {
	return min(nodeRestMin<<max(failures-1, 0), nodeRestMax)
}

// restClock is the time rests are counted in: ns since d.restEpoch, plus one
// so that 0 stays "healthy". Kept relative to an epoch read from the same
// clock, so that the default clock's monotonic reading counts, not the wall
// clock, which may step.
func (d *Driver) restClock() int64 { return int64(d.now().Sub(d.restEpoch)) + 1 }

// noteReply records how node i's call ended, when it ended before the node
// timeout: an answer (a Redis error included) ends its rest; a failure to
// reach the node starts or lengthens one. A call cut short by its caller
// says nothing about the node.
func (d *Driver) noteReply(i int, err error) {
	r := &d.rests[i]
	var rerr redis.Error
	switch {
	case err == nil || errors.As(err, &rerr):
		if r.until.Load() != 0 || r.failures.Load() != 0 {
			r.failures.Store(0)
			r.until.Store(0)
		}
	case errors.Is(err, context.Canceled):
	default:
		d.noteNoAnswer(i)
	}
}

// noteNoAnswer rests node i: a call to it was still out at the node timeout,
// or could not reach it.
func (d *Driver) noteNoAnswer(i int) {
	r := &d.rests[i]
	f := r.failures.Add(1)
	if f > maxRestFailures {
		r.failures.Store(maxRestFailures)
		f = maxRestFailures
	}
	r.until.Store(d.restClock() + int64(restFor(f)))
}

// askable says which nodes an attempt asks: all but those resting, each
// node past its rest claimed by one attempt as its probe. An attempt with
// an explicit owner (mayRest false) asks all: it can re-enter a lock the
// owner holds anywhere, and must reach every node that holds it.
func (d *Driver) askable(mayRest bool) (ask []int, resting []bool) {
	if !mayRest {
		return allNodes(len(d.nodes)), nil
	}
	ask = make([]int, 0, len(d.nodes))
	now := d.restClock()
	for i := range d.nodes {
		r := &d.rests[i]
		u := r.until.Load()
		if u == 0 || now >= u && r.until.CompareAndSwap(u, now+int64(restFor(r.failures.Load()))) {
			ask = append(ask, i)
			continue
		}
		if resting == nil {
			resting = make([]bool, len(d.nodes))
		}
		resting[i] = true
	}
	if len(ask) < d.quorum {
		return allNodes(len(d.nodes)), nil
	}
	return ask, resting
}
