package mutex

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// nodeReply is one node's answer to a fan-out call. pending is set when the
// node did not answer in time: it reports the call's eventual end, so clean-up
// can come after whatever the call did on that node.
type nodeReply struct {
	vals    []int64
	err     error
	pending <-chan error
	late    *[]int64 // with pending: the call's values, to read once pending is done
}

// fanout runs fn on every node at once, each under ctx bounded by timeout,
// and returns when all answered or the timeout passed. Calls that did not
// answer in time are left to finish in goroutines the Locker owns (Close waits
// for them); go-redis bounds them by its own read timeout.
func (l *Locker) fanout(ctx context.Context, timeout time.Duration, nodes []int, fn func(ctx context.Context, c redis.UniversalClient) ([]int64, error)) []nodeReply {
	return l.fanoutUntil(ctx, timeout, nodes, fn, nil)
}

// fanoutUntil is fanout that also stops waiting as soon as enough says the
// replies so far decide the outcome; the nodes still out are reported like
// those that timed out (with pending set).
func (l *Locker) fanoutUntil(ctx context.Context, timeout time.Duration, nodes []int, fn func(ctx context.Context, c redis.UniversalClient) ([]int64, error), enough func([]nodeReply, []bool) bool) []nodeReply {
	// The calls run on a context of their own, ended by the caller's ctx or
	// the timeout but not by an early return: a call abandoned early still
	// completes, and its pending channel says when.
	callCtx, cancelCalls, stopWatch := callContext(ctx, timeout)
	left := atomic.Int32{}
	left.Store(int32(len(nodes)))
	out := make([]nodeReply, len(l.nodes))
	results := make(chan fanResult, len(nodes))
	done := make([]chan error, len(l.nodes))
	late := make([][]int64, len(l.nodes))
	// The node timeout, not the client's read timeout (which may be
	// seconds), says that a node did not answer: the calls still out when
	// it passes make their nodes rest (noderest.go) there and then.
	state := make([]atomic.Int32, len(l.nodes)) // callRunning, callReturned, callTimedOut
	stopTimeouts := context.AfterFunc(callCtx, func() {
		if !errors.Is(callCtx.Err(), context.DeadlineExceeded) {
			return
		}
		for _, i := range nodes {
			if state[i].CompareAndSwap(callRunning, callTimedOut) {
				l.noteNoAnswer(i)
			}
		}
	})
	for _, i := range nodes {
		done[i] = make(chan error, 1)
		l.goBg(func() {
			vals, err := fn(callCtx, l.nodes[i])
			if state[i].CompareAndSwap(callRunning, callReturned) {
				l.noteReply(i, err)
			}
			late[i] = vals // read only after done[i]
			done[i] <- err
			results <- fanResult{i, vals, err}
			if left.Add(-1) == 0 {
				stopTimeouts()
				stopWatch()
				cancelCalls()
			}
		})
	}
	answered := make([]bool, len(l.nodes))
	decided := collectReplies(ctx, callCtx, timeout, len(nodes), results, out, answered, enough)
	if decided {
		// The calls still out are not the caller's any more: they end at
		// the node timeout, not when the caller cancels its ctx after Lock
		// returned (which would cut a slow node's script load short).
		stopWatch()
	}
	noReplies(ctx, timeout, nodes, out, answered, decided, done, late)
	return out
}

// fanResult is one node's answer to a fan-out call.
type fanResult struct {
	i    int
	vals []int64
	err  error
}

// collectReplies takes the replies of calls nodes into out (and answered)
// until all came, callCtx ended (one timer for both: at the timeout, with
// the caller's ctx, or once every call returned; in that last case, and in
// a race with the others, replies already sent are still taken), or enough
// says they decide the outcome: decided.
func collectReplies(ctx, callCtx context.Context, timeout time.Duration, calls int, results <-chan fanResult, out []nodeReply, answered []bool, enough func([]nodeReply, []bool) bool) (decided bool) {
	for n := 0; n < calls; n++ {
		var r fanResult
		select {
		case r = <-results:
		case <-callCtx.Done():
			select {
			case r = <-results:
			default:
				return false
			}
		}
		if r.err != nil && callCtx.Err() != nil && (errors.Is(r.err, context.DeadlineExceeded) || errors.Is(r.err, context.Canceled)) {
			r.err = timedOut(ctx, timeout) // the call returned its context's end
		}
		out[r.i] = nodeReply{vals: r.vals, err: r.err}
		answered[r.i] = true
		if enough != nil && enough(out, answered) {
			return true
		}
	}
	return false
}

// noReplies fills in out for the nodes with no reply: why (not awaited,
// the caller's ctx, or the timeout), and where the call's end and values
// will come.
func noReplies(ctx context.Context, timeout time.Duration, nodes []int, out []nodeReply, answered []bool, decided bool, done []chan error, late [][]int64) {
	var why error
	for _, i := range nodes {
		if answered[i] {
			continue
		}
		if why == nil {
			why = errNotAwaited
			if !decided {
				why = timedOut(ctx, timeout)
			}
		}
		out[i] = nodeReply{err: why, pending: done[i], late: &late[i]}
	}
}

// A fan-out call's state, for noteReply and noteNoAnswer: each call is
// reported once, as whichever comes first.
const (
	callRunning int32 = iota
	callReturned
	callTimedOut
)

// errNotAwaited: a node whose reply a fan-out did not wait for, since the
// others' had decided.
var errNotAwaited = errors.New("reply not awaited: the other nodes decided")

// timedOut is why a node's call ended unanswered: the caller's ctx, or
// else the node timeout.
func timedOut(ctx context.Context, timeout time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return &noReplyError{timeout}
}

// noReplyError: a node that did not answer within the node timeout.
type noReplyError struct{ timeout time.Duration }

func (e *noReplyError) Error() string   { return "no reply within " + e.timeout.String() }
func (e *noReplyError) Timeout() bool   { return true }
func (e *noReplyError) Temporary() bool { return true }

// callContext is the context of a fan-out's calls: ctx's values, ended at
// the timeout or with ctx, but not by the fan-out's early return. A ctx that
// can never end (no Done channel) needs neither WithoutCancel nor AfterFunc:
// three allocations fewer per fan-out.
func callContext(ctx context.Context, timeout time.Duration) (context.Context, context.CancelFunc, func() bool) {
	if ctx.Done() == nil {
		callCtx, cancel := context.WithTimeout(ctx, timeout)
		return callCtx, cancel, noWatch
	}
	callCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
	return callCtx, cancel, context.AfterFunc(ctx, cancel)
}

func noWatch() bool { return true }

func allNodes(n int) []int {
	s := make([]int, n)
	for i := range s {
		s[i] = i
	}
	return s
}
