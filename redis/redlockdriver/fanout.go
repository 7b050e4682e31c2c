package redlockdriver

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

// nodeCall is one call of a fan-out on one node.
type nodeCall func(ctx context.Context, c redis.UniversalClient) ([]int64, error)

// fanout runs fn on nodes at once, each under ctx bounded by timeout, and
// returns when all answered or the timeout passed (replies by node; the
// nodes not in nodes are left zero). Calls that did not answer in time are
// left to finish in goroutines the driver owns (Close waits for them);
// go-redis bounds them by its own read timeout.
func (d *Driver) fanout(ctx context.Context, timeout time.Duration, nodes []int, fn nodeCall) []nodeReply {
	return d.fanoutUntil(ctx, timeout, nodes, fn, nil)
}

// fanoutUntil is fanout that also stops waiting as soon as enough says the
// replies so far decide the outcome; the nodes still out are reported like
// those that timed out (with pending set).
func (d *Driver) fanoutUntil(ctx context.Context, timeout time.Duration, nodes []int, fn nodeCall, enough func([]nodeReply, []bool) bool) []nodeReply {
	return d.fan(ctx, timeout, nodes, fn, enough, true)
}

// fan is fanoutUntil; rest says whether the calls' ends count for the
// nodes' rests (noderest.go): not for a clean-up's.
func (d *Driver) fan(ctx context.Context, timeout time.Duration, nodes []int, fn nodeCall, enough func([]nodeReply, []bool) bool, rest bool) []nodeReply {
	// The calls run on a context of their own, ended by the caller's ctx or
	// the timeout but not by an early return: a call abandoned early still
	// completes, and its pending channel says when.
	callCtx, cancelCalls, stopWatch := callContext(ctx, timeout)
	f := &fanCalls{
		d: d, fn: fn, ctx: callCtx, rest: rest,
		results: make(chan fanResult, len(nodes)),
		done:    make([]chan error, len(d.nodes)),
		late:    make([][]int64, len(d.nodes)),
		state:   make([]atomic.Int32, len(d.nodes)),
	}
	f.left.Store(int32(len(nodes)))
	// The node timeout, not the client's read timeout (which may be
	// seconds), says that a node did not answer: the calls still out when
	// it passes make their nodes rest (noderest.go) there and then.
	stopTimeouts := context.AfterFunc(callCtx, func() {
		if !rest || !errors.Is(callCtx.Err(), context.DeadlineExceeded) {
			return
		}
		for _, i := range nodes {
			if f.state[i].CompareAndSwap(callRunning, callTimedOut) {
				d.noteNoAnswer(i)
			}
		}
	})
	f.end = func() {
		stopTimeouts()
		stopWatch()
		cancelCalls()
	}
	if len(nodes) == 0 {
		f.end()
	}
	for _, i := range nodes {
		f.done[i] = make(chan error, 1)
		d.run.Go(func() { f.call(i) })
	}
	out := make([]nodeReply, len(d.nodes))
	answered := make([]bool, len(d.nodes))
	decided := collectReplies(ctx, callCtx, timeout, len(nodes), f.results, out, answered, enough)
	if decided {
		// The calls still out are not the caller's any more: they end at
		// the node timeout, not when the caller cancels its ctx after the
		// call returned (which would cut a slow node's script load short).
		stopWatch()
	}
	noReplies(ctx, timeout, nodes, out, answered, decided, f.done, f.late)
	return out
}

// fanCalls is one fan-out's calls in flight.
type fanCalls struct {
	d       *Driver
	fn      nodeCall
	ctx     context.Context
	rest    bool
	left    atomic.Int32
	results chan fanResult
	done    []chan error
	late    [][]int64
	state   []atomic.Int32 // by node: callRunning, callReturned, callTimedOut
	end     func()         // once the last call returned
}

// call runs the call on node i, in a goroutine of the driver's.
func (f *fanCalls) call(i int) {
	vals, err := f.fn(f.ctx, f.d.nodes[i])
	if f.state[i].CompareAndSwap(callRunning, callReturned) && f.rest {
		f.d.noteReply(i, err)
	}
	f.late[i] = vals // read only after done[i]
	f.done[i] <- err
	f.results <- fanResult{i, vals, err}
	if f.left.Add(-1) == 0 {
		f.end()
	}
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
			why = ErrNotAwaited
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
