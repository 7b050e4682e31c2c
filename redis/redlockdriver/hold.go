package redlockdriver

import (
	"context"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redfence/redfence/mutex/backend"
	"github.com/redfence/redfence/redis/internal/redisproto"
	"github.com/redfence/redfence/redis/internal/redisrt"
)

// hold is Redlock's own state of one held lock: its Grant's Handle, given
// back in every Lease of the lock.
type hold struct {
	tokenN    int64           // the token granted
	token     string          // the same, as the scripts take it
	lease     time.Duration   // the lease the acquisition asked for (releaseArgs)
	asked     []int           // the nodes asked (nil: all; see noderest.go), the only ones it can hold
	settled   <-chan struct{} // nodes that granted late carry the token too (nil: none late)
	lateNodes []int           // those nodes
	lateDone  []atomic.Bool   // by node: that late node carries it

	mu           sync.Mutex // a leaf
	releaseNodes []int      // the first Release went to these (the others: releaseLate); nil before
}

// holdOf is l's hold; a Lease without one of its token (not from this
// driver's grant) gets one that asked every node, with none late and the
// lease unknown.
func holdOf(l backend.Lease) *hold {
	if h, ok := l.Handle.(*hold); ok && h != nil && h.tokenN == l.Token {
		return h
	}
	return &hold{tokenN: l.Token, token: strconv.FormatInt(l.Token, 10)}
}

func (h *hold) isSettled() bool {
	if h.settled == nil {
		return true
	}
	select {
	case <-h.settled:
		return true
	default:
		return false
	}
}

// awaitSettled waits, until ctx ends, for the nodes that granted the lock
// after the quorum was reached to carry its token as well, so that a
// release frees them too instead of leaving them to the lease.
func (h *hold) awaitSettled(ctx context.Context) {
	if h.settled == nil {
		return
	}
	select {
	case <-h.settled:
	case <-ctx.Done():
	}
}

// forRelease splits the nodes for a Release: those to release now, and
// those still answering the acquisition (late), to release once they have
// (releaseLate): a release sent now could reach such a node before the
// acquisition and find nothing, leaving it held until the lease ran out. A
// second Release of the lock (a retry after a failed one) goes to the
// first one's nodes alone: a second release of a late node would take a
// second count of a re-entered lock.
func (h *hold) forRelease(n int) (now, later []int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.releaseNodes != nil {
		return h.releaseNodes, nil
	}
	asked := h.asked
	if asked == nil {
		asked = allNodes(n)
	}
	if h.isSettled() {
		h.releaseNodes = asked
		return asked, nil
	}
	for _, i := range asked {
		if slices.Contains(h.lateNodes, i) && !h.lateDone[i].Load() {
			later = append(later, i)
		} else {
			now = append(now, i)
		}
	}
	h.releaseNodes = now
	if now == nil {
		h.releaseNodes = []int{}
	}
	return now, later
}

// settleLate looks after the nodes still answering when the lock was won:
// they may grant it late. One goroutine waits for them and raises a node
// that granted with another token to the chosen one (with the proposal
// taken everywhere, none is), so that a release's token matches there as
// well; its settled closes when it is done. It returns the lock's hold.
func (d *Driver) settleLate(replies []nodeReply, keys []string, owner string, chosen int64, asked []int, lease time.Duration) *hold {
	h := &hold{tokenN: chosen, token: strconv.FormatInt(chosen, 10), lease: lease, asked: asked}
	for i, r := range replies {
		if r.pending != nil {
			h.lateNodes = append(h.lateNodes, i)
		}
	}
	if len(h.lateNodes) == 0 {
		return h
	}
	settled := make(chan struct{})
	h.settled, h.lateDone = settled, make([]atomic.Bool, len(d.nodes))
	lateNodes, lateDone, chosenStr := h.lateNodes, h.lateDone, h.token
	d.run.Go(func() {
		defer close(settled)
		for _, i := range lateNodes {
			r := replies[i]
			err := <-r.pending
			if v := *r.late; err == nil && len(v) == 3 && v[0] != 0 && v[1] != chosen {
				ctx, cancel := context.WithTimeout(context.Background(), redisrt.CleanupTimeout)
				_ = redisproto.RaiseScript.Run(ctx, d.nodes[i], keys, owner, chosenStr).Err()
				cancel()
			}
			lateDone[i].Store(true)
		}
	})
	return h
}
