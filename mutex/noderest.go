package mutex

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
// a paused master). After a call to a node times out or cannot reach it, the
// node rests: attempts count it as a refusal without asking, for 100 ms,
// doubling with every failure that follows up to a second. The first attempt
// after the rest asks it again, alone (the others go on skipping it until
// that probe answers), and an answer ends the rest. Safety is unchanged (a
// resting node's vote counts as a no, as a timeout's does), and an attempt
// never rests so many nodes that fewer than a quorum would be asked: then it
// asks every node, as if none rested.
const (
	nodeRestMin = 100 * time.Millisecond
	nodeRestMax = time.Second
)

// nodeRest is one node's state.
type nodeRest struct {
	failures atomic.Int32 // calls in a row that found it unreachable
	until    atomic.Int64 // unix ns: not asked before; 0 when healthy
}

// errNodeResting: a node an attempt did not ask, since it failed to answer
// lately (see nodeRest).
var errNodeResting = errors.New("not asked: it failed to answer lately and rests before it is asked again")

func restFor(failures int32) time.Duration {
	if failures > 5 {
		return nodeRestMax
	}
	return min(nodeRestMin<<(failures-1), nodeRestMax)
}

// noteReply records how node i's call ended: an answer (a Redis error
// included) ends its rest; a timeout or a failure to reach it starts or
// lengthens one. A call cut short by its caller says nothing about the node.
func (l *Locker) noteReply(i int, err error) {
	if l.rests == nil {
		return
	}
	r := &l.rests[i]
	var rerr redis.Error
	switch {
	case err == nil || errors.As(err, &rerr):
		if r.until.Load() != 0 || r.failures.Load() != 0 {
			r.failures.Store(0)
			r.until.Store(0)
		}
	case errors.Is(err, context.Canceled):
	default:
		f := r.failures.Add(1)
		r.until.Store(l.now().Add(restFor(f)).UnixNano())
	}
}

// askable says which nodes an attempt asks: all but those resting, each
// node past its rest claimed by one attempt as its probe. An attempt with
// an explicit owner (mayRest false) asks all: it can re-enter a lock the
// owner holds anywhere, and must reach every node that holds it.
func (l *Locker) askable(mayRest bool) (ask []int, resting []bool) {
	if !mayRest {
		return allNodes(len(l.nodes)), nil
	}
	ask = make([]int, 0, len(l.nodes))
	now := l.now()
	for i := range l.nodes {
		r := &l.rests[i]
		u := r.until.Load()
		if u == 0 || now.UnixNano() >= u && r.until.CompareAndSwap(u, now.Add(restFor(max(r.failures.Load(), 1))).UnixNano()) {
			ask = append(ask, i)
			continue
		}
		if resting == nil {
			resting = make([]bool, len(l.nodes))
		}
		resting[i] = true
	}
	if len(ask) < l.quorum {
		return allNodes(len(l.nodes)), nil
	}
	return ask, resting
}
