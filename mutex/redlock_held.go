package mutex

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redfence/redfence/mutex/internal/redisproto"
)

// redlockRelease takes one count on every node. It returns the largest count
// left (0: freed), -1 when no node held the lock, or an error when no node
// confirmed and some failed.
func (l *Locker) redlockRelease(ctx context.Context, lk *Lock, nodes []int) (int64, error) {
	// Done once a majority released: no quorum can form for the old holder
	// any more, and the other nodes finish in the background.
	decided := func(out []nodeReply, answered []bool) bool {
		freed := 0
		for i, r := range out {
			if answered[i] && r.err == nil && len(r.vals) == 1 && r.vals[0] == 0 {
				freed++
			}
		}
		return freed >= l.quorum
	}
	replies := l.fanoutUntil(ctx, l.nodeTimeout(lk.leaseTTL()), nodes, func(ctx context.Context, c redis.UniversalClient) ([]int64, error) {
		n, err := l.releaseLock(ctx, c, lk).Int64()
		return []int64{n}, err
	}, decided)
	left := int64(-1)
	var errs []error
	for _, i := range nodes {
		r := replies[i]
		if r.err != nil {
			errs = append(errs, r.err)
			continue
		}
		left = max(left, r.vals[0])
	}
	if left < 0 && len(errs) > 0 {
		return 0, errors.Join(errs...)
	}
	return left, nil
}

// redlockExtend sets the lease on every node. It reports held when a majority
// extended within the validity, gone when a majority said the lock is not
// theirs (or too few could still confirm), and unknown otherwise; why says,
// node by node, what kept an unknown one from a majority (ErrUnavailable).
func (l *Locker) redlockExtend(ctx context.Context, locks []*Lock, ttls []time.Duration) (results []renewOutcome, sent time.Time, why error) {
	sent = l.now()
	timeout := l.nodeTimeout(slices.Min(ttls))
	calls := l.extendCalls(locks, ttls)
	replies := l.fanout(ctx, timeout, allNodes(len(l.nodes)), func(ctx context.Context, c redis.UniversalClient) ([]int64, error) {
		cmds, err := redisproto.RunScripts(ctx, c, redisproto.ExtendScript, calls, nil) // each command's own reply says how it went
		return redisproto.ReplyInts(cmds), err
	})
	results = make([]renewOutcome, len(locks))
	for j := range locks {
		yes, no := 0, 0
		for _, r := range replies {
			if r.vals == nil || j >= len(r.vals) {
				continue
			}
			switch r.vals[j] {
			case 1:
				yes++
			case 0:
				no++
			}
		}
		valid := ttls[j]-l.now().Sub(sent)-l.drift(ttls[j]) > 0
		switch {
		case yes >= l.quorum && valid:
			results[j] = renewHeld
		case no > len(l.nodes)-l.quorum:
			results[j] = renewGone // a majority can no longer confirm
		default:
			results[j] = renewUnknown
		}
	}
	var errs []error
	for i, r := range replies {
		if r.err != nil {
			errs = append(errs, fmt.Errorf("node %s: %w", l.nodeName(i), r.err))
		}
	}
	why = unavailable(fmt.Errorf("%w: %w", errNoMajority, errors.Join(errs...)))
	if len(errs) == 0 {
		why = unavailable(fmt.Errorf("%w in time: the validity ran out", errNoMajority))
	}
	return results, sent, why
}

type renewOutcome int

const (
	renewUnknown renewOutcome = iota
	renewHeld
	renewGone
)

// redlockTTL is the lease a majority still guarantees: the quorum-th longest
// remaining lease over the nodes that hold the lock.
func (l *Locker) redlockTTL(ctx context.Context, lk *Lock) (time.Duration, error) {
	keys := []string{lk.lockKey}
	replies := l.fanout(ctx, l.nodeTimeout(lk.leaseTTL()), allNodes(len(l.nodes)), func(ctx context.Context, c redis.UniversalClient) ([]int64, error) {
		n, err := redisproto.TTLScript.Run(ctx, c, keys, lk.owner, lk.tokenStr).Int64()
		return []int64{n}, err
	})
	var left []int64
	var errs []error
	for _, r := range replies {
		switch {
		case r.err != nil:
			errs = append(errs, r.err)
		case r.vals[0] >= 0:
			left = append(left, r.vals[0])
		}
	}
	if len(left) >= l.quorum {
		slices.Sort(left)
		slices.Reverse(left)
		return time.Duration(left[l.quorum-1]) * time.Microsecond, nil
	}
	if len(left)+len(errs) >= l.quorum {
		return 0, errors.Join(errs...) // cannot tell
	}
	return -1, nil
}

// redlockReleaseAll releases locks on every node, pipelined per node, each
// node bounded by timeout (Close).
func (l *Locker) redlockReleaseAll(ctx context.Context, timeout time.Duration, locks []*Lock) error {
	calls := l.releaseCalls(locks)
	replies := l.fanout(ctx, timeout, allNodes(len(l.nodes)), func(ctx context.Context, c redis.UniversalClient) ([]int64, error) {
		_, err := redisproto.RunScripts(ctx, c, redisproto.ReleaseScript, calls, nil)
		return nil, err
	})
	var errs []error
	for _, r := range replies {
		if r.err != nil && !errors.Is(r.err, redis.Nil) {
			errs = append(errs, r.err)
		}
	}
	if len(errs) > len(l.nodes)-l.quorum {
		return errors.Join(errs...)
	}
	return nil
}

// unsettled splits the nodes for an Unlock: those to release now, and
// those still answering the acquisition (late), to release once they have
// (releaseLate): a release sent now could reach such a node before the
// acquisition and find nothing, leaving it held until the lease ran out.
func (lk *Lock) unsettled() (now, later []int) {
	h := holdOf(lk)
	if h == nil {
		return allNodes(len(lk.l.nodes)), nil
	}
	asked := h.asked
	if asked == nil {
		asked = allNodes(len(lk.l.nodes))
	}
	if h.isSettled() {
		return asked, nil
	}
	for _, i := range asked {
		if slices.Contains(h.lateNodes, i) && !h.lateDone[i].Load() {
			later = append(later, i)
		} else {
			now = append(now, i)
		}
	}
	return now, later
}

// releaseLate releases lk, in the background, on nodes that granted it after
// the quorum was reached, once they carry its token (see unsettled). Each
// node is released once: a second release would take a second count of a
// re-entered lock.
func (l *Locker) releaseLate(lk *Lock, nodes []int) {
	l.goBg(func() {
		t := time.NewTimer(cleanupTimeout)
		defer t.Stop()
		select {
		case <-holdOf(lk).settled: // later nodes: a hold with late ones
		case <-t.C:
			return
		}
		// A node timeout, as every Redlock call: a node that does not
		// answer (paused) must not pile up calls of a cleanup's length.
		timeout := l.nodeTimeout(lk.leaseTTL())
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		l.fanout(ctx, timeout, nodes, func(ctx context.Context, c redis.UniversalClient) ([]int64, error) {
			n, err := l.releaseLock(ctx, c, lk).Int64()
			return []int64{n}, err
		})
	})
}

// redlockHold is Redlock's own state of one held lock, handed back with its
// grant (Lock.handle): nil when every node was asked and none answered late.
type redlockHold struct {
	asked        []int           // the nodes asked (nil: all; see noderest.go), the only ones it can hold
	settled      <-chan struct{} // nodes that granted late carry the token too (nil: none late)
	lateNodes    []int           // those nodes
	lateDone     []atomic.Bool   // by node: that late node carries it
	releaseNodes []int           // Unlock's own release went to these (the others: releaseLate)
}

// holdOf is lk's redlockHold, nil for none.
func holdOf(lk *Lock) *redlockHold {
	h, _ := lk.handle.(*redlockHold)
	return h
}

func (h *redlockHold) isSettled() bool {
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

// awaitSettled waits, until timeout fires, for the Redlock nodes that
// granted lk after the quorum was reached to carry its token as well, so
// that a release frees them too instead of leaving them to the lease.
func awaitSettled(lk *Lock, timeout <-chan time.Time) {
	h := holdOf(lk)
	if h == nil || h.settled == nil {
		return
	}
	select {
	case <-h.settled:
	case <-timeout:
	}
}
