package mutex

import (
	"context"
	"errors"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/redfence/redfence/mutex/internal/redisproto"
)

// NewRedlock returns a Locker over N ≥ 3 independent Redis masters (not
// replicas of one another, not a Cluster): a lock is held when a majority,
// N/2+1, granted it within its validity. The Locker has the API and the
// semantics of a single-deployment one (tokens, renewal, reentrancy,
// waiting, telemetry); see the package documentation for the algorithm and
// what it assumes. A bad argument returns an error wrapping ErrInvalid.
//
// A master that stopped answering (a call still out at the node timeout,
// or one that could not reach it) rests: acquisitions with the Locker's own
// owner ids count it as a refusal without asking it, for 100 ms after the
// first failure, doubling up to a second, then ask it again; an answer
// within the node timeout ends the rest. A paused or partitioned master then
// costs an acquisition nothing, where asking it would cost a node timeout's
// wait and a clean-up each time. Acquisitions never rest so many masters
// that fewer than a majority would be asked, and WithOwner acquisitions ask
// every master. A lock taken while masters rest is held on fewer of them,
// so its renewals have less slack: with 5 masters and 2 resting, one more
// that fails to confirm a renewal leaves no majority. A process so busy that
// its calls wait for connections past the node timeout rests healthy
// masters too (the pool size is the client's PoolSize).
func NewRedlock(clients []redis.UniversalClient, opts ...Option) (*Locker, error) {
	if len(clients) < 3 {
		return nil, invalid("Redlock needs at least 3 independent masters, got %d", len(clients))
	}
	addrs, err := nodeAddrs(clients)
	if err != nil {
		return nil, err
	}
	l := New(clients[0], opts...)
	if l.err != nil {
		err := l.err
		_ = l.Close()
		return nil, err
	}
	l.nodes = slices.Clone(clients)
	l.rests, l.restEpoch = make([]nodeRest, len(clients)), l.now()
	l.be = redlock{l}
	l.addrs = addrs
	l.quorum = len(clients)/2 + 1
	return l, nil
}

// nodeName names node i in errors: its index, and its address when known.
func (l *Locker) nodeName(i int) string {
	if l.addrs[i] == "" {
		return strconv.Itoa(i)
	}
	return strconv.Itoa(i) + " (" + l.addrs[i] + ")"
}

// nodeAddrs checks that Redlock's clients are distinct standalone or
// Sentinel clients and returns their addresses ("" for Sentinel). One
// server twice would make one node count as two votes: a quorum of one
// machine. Two names for one address (localhost and 127.0.0.1) are not
// caught.
func nodeAddrs(clients []redis.UniversalClient) ([]string, error) {
	addrs := make([]string, len(clients))
	for i, c := range clients {
		switch v := c.(type) {
		case nil:
			return nil, invalid("Redlock node %d is nil", i)
		case *redis.Client:
			if v == nil {
				return nil, invalid("Redlock node %d is nil", i)
			}
			// go-redis names a Sentinel client's Addr "FailoverClient": no
			// address to compare. (A custom Dialer that reaches several
			// servers under one Addr must give them distinct Addrs.)
			if a := v.Options().Addr; a != "FailoverClient" {
				addrs[i] = a
			}
		case *redis.ClusterClient:
			return nil, invalid("Redlock node %d is a Cluster client: Redlock needs independent masters", i)
		}
		for j := range i {
			if reflect.TypeOf(c).Comparable() && clients[j] == c {
				return nil, invalid("Redlock nodes %d and %d are the same client: each node must be its own master", j, i)
			}
			if addrs[i] != "" && addrs[j] == addrs[i] {
				return nil, invalid("Redlock nodes %d and %d both reach %s: each node must be its own master", j, i, addrs[i])
			}
		}
	}
	return addrs, nil
}

// proposalLead is how far ahead of this process's clock a Redlock attempt
// proposes its token: enough to cover the one-way latency and the clock
// differences between this host and the nodes, so that nodes usually take
// the proposal. A node that issues more instead only costs the raise round.
const proposalLead = 100 * time.Millisecond

// nodeTimeout is the per-node bound of one Redlock call.
func (l *Locker) nodeTimeout(ttl time.Duration) time.Duration {
	if l.cfg.nodeTimeout > 0 {
		return l.cfg.nodeTimeout
	}
	return min(max(ttl/20, 5*time.Millisecond), 500*time.Millisecond)
}

// redlockAcquire is one Redlock attempt: acquire on every node, and with a
// majority inside the validity, raise the majority's tokens to the highest
// and require a majority to confirm. Otherwise it releases what it took, on
// a fresh bounded context, and reports contention, or an outage (a
// *QuorumError) when too few nodes answered to tell.
func (l *Locker) redlockAcquire(ctx context.Context, lockKey, owner string, lc *lockConfig, waiting bool) (acquireResult, error) {
	span := trace.SpanFromContext(ctx)
	start := l.now()
	keys := []string{lockKey}
	replies, asked := l.redlockAsk(ctx, keys, owner, lc, waiting)
	v := l.tally(replies)
	validity := lc.ttl - l.now().Sub(start) - l.drift(lc.ttl)
	if span.IsRecording() {
		span.AddEvent("redlock.acquire", trace.WithAttributes(
			attribute.Int("redfence.redlock.votes", len(v.voters)),
			attribute.Int("redfence.redlock.quorum", l.quorum),
			attribute.String("redfence.redlock.nodes", strings.Join(v.outcomes, ",")),
			attribute.Float64("redfence.redlock.validity", validity.Seconds())))
	}
	if len(v.voters) >= l.quorum && validity > 0 {
		chosen, confirmed := l.redlockConfirm(ctx, span, keys, owner, lc, &v)
		validity = lc.ttl - l.now().Sub(start) - l.drift(lc.ttl)
		if confirmed >= l.quorum && validity > 0 {
			res := acquireResult{status: 1, token: chosen}
			if v.reentered >= l.quorum {
				res.status = 2
			}
			if h := l.settleLate(replies, keys, owner, chosen, asked); h != nil {
				res.handle = h // no nil pointer in the interface
			}
			return res, nil
		}
	}

	// No lock: give back what this attempt took, at once, on every node.
	l.redlockGiveBack(lockKey, owner, lc.owner != "", v.voters, v.tokens, replies)
	qerr := &QuorumError{Quorum: l.quorum, Addrs: slices.Clone(l.addrs), Nodes: v.answers, Late: len(v.voters) >= l.quorum}
	if qerr.outage() {
		return acquireResult{}, qerr
	}
	remaining := v.remaining
	if remaining == 0 {
		remaining = lc.retryMin
	}
	return acquireResult{status: 0, remaining: remaining, why: qerr}, nil
}

// redlockAsk runs the acquire script on every node but those resting (see
// noderest.go; asked is nil when it asked all), and stops waiting once the
// replies decide: a majority granted, or too many refused or failed for a
// majority to remain possible.
func (l *Locker) redlockAsk(ctx context.Context, keys []string, owner string, lc *lockConfig, waiting bool) (replies []nodeReply, asked []int) {
	ask, resting := l.askable(lc.owner == "")
	decided := func(out []nodeReply, answered []bool) bool {
		yes, no := 0, 0
		for i, r := range out {
			if resting != nil && resting[i] {
				no++
				continue
			}
			if !answered[i] {
				continue
			}
			if r.err == nil && len(r.vals) == 3 && r.vals[0] != 0 {
				yes++
			} else {
				no++
			}
		}
		return yes >= l.quorum || no > len(l.nodes)-l.quorum
	}
	if lc.owner != "" {
		// An explicit owner can re-enter from anywhere, and a re-entry must
		// see one token on every node: wait for all nodes (within the node
		// timeout) so that the raise reaches each node that granted.
		decided = nil
	}
	// Propose a token a little ahead of our clock: nodes whose counter and
	// clock are behind it take it as it is, and when the whole quorum did,
	// the quorum already carries one token and the raise round is skipped.
	proposal := l.now().Add(proposalLead).UnixMicro()
	args := []any{owner, lc.ttl.Milliseconds(), l.keyTTL(lc.ttl), proposal}
	if waiting {
		args = append(args, l.id) // marks the lock waited-for, so that its release publishes
	}
	replies = l.fanoutUntil(ctx, l.nodeTimeout(lc.ttl), ask, func(ctx context.Context, c redis.UniversalClient) ([]int64, error) {
		reply, err := redisproto.AcquireScript.Run(ctx, c, keys, args...).Result()
		if err != nil {
			return nil, err
		}
		n, _, err := redisproto.ParseAcquire(reply)
		return n[:], err
	}, decided)
	if resting == nil {
		return replies, nil
	}
	for i := range resting {
		if resting[i] {
			replies[i] = nodeReply{err: errNodeResting}
		}
	}
	return replies, ask
}

// votes are a Redlock attempt's replies, counted.
type votes struct {
	voters    []int         // nodes that granted
	tokens    []int64       // by node: the token it issued
	reentered int           // nodes that granted a re-entry
	remaining time.Duration // the longest lease left of another holder
	answers   []error       // by node, a QuorumError's Nodes
	outcomes  []string      // by node, for the span
}

func (l *Locker) tally(replies []nodeReply) votes {
	v := votes{tokens: make([]int64, len(l.nodes)), answers: make([]error, len(l.nodes)), outcomes: make([]string, len(l.nodes))}
	for i, r := range replies {
		switch {
		case r.err != nil:
			v.answers[i], v.outcomes[i] = r.err, "error"
			if r.pending != nil {
				v.outcomes[i] = "timeout"
			} else if r.err == errNodeResting {
				v.outcomes[i] = "resting"
			}
		case len(r.vals) != 3:
			v.answers[i], v.outcomes[i] = errors.New("mutex: unexpected reply from the acquire script"), "error"
		case r.vals[0] == 0:
			v.answers[i], v.outcomes[i] = ErrNotAcquired, "held"
			v.remaining = max(v.remaining, time.Duration(r.vals[2])*time.Millisecond)
		default:
			v.voters = append(v.voters, i)
			v.tokens[i], v.outcomes[i] = r.vals[1], "acquired"
			if r.vals[0] == 2 {
				v.reentered++
			}
		}
	}
	return v
}

// redlockConfirm makes the voters carry one token, the highest any issued:
// when they issued different ones, a second round raises the others, and
// only those that confirm count.
func (l *Locker) redlockConfirm(ctx context.Context, span trace.Span, keys []string, owner string, lc *lockConfig, v *votes) (chosen int64, confirmed int) {
	for _, i := range v.voters {
		chosen = max(chosen, v.tokens[i])
	}
	agreed := true
	for _, i := range v.voters {
		agreed = agreed && v.tokens[i] == chosen
	}
	confirmed = len(v.voters)
	if !agreed {
		chosenStr := strconv.FormatInt(chosen, 10)
		raised := l.fanout(ctx, l.nodeTimeout(lc.ttl), v.voters, func(ctx context.Context, c redis.UniversalClient) ([]int64, error) {
			n, err := redisproto.RaiseScript.Run(ctx, c, keys, owner, chosenStr).Int64()
			return []int64{n}, err
		})
		confirmed = 0
		for _, i := range v.voters {
			if r := raised[i]; r.err == nil && len(r.vals) == 1 && r.vals[0] == 1 {
				confirmed++
				v.tokens[i] = chosen
			}
		}
	}
	if span.IsRecording() {
		span.AddEvent("redlock.token", trace.WithAttributes(
			attribute.Bool("redfence.redlock.agreed", agreed),
			attribute.Int("redfence.redlock.confirmed", confirmed),
			attribute.Int64("redfence.token", chosen)))
	}
	return chosen, confirmed
}

// settleLate looks after the nodes still answering when the lock was won:
// they may grant it late. One goroutine waits for them and raises a node
// that granted with another token to the chosen one (with the proposal
// taken everywhere, none is), so that Unlock's token matches there as well;
// its settled closes when it is done. It returns the lock's redlockHold,
// nil when all nodes were asked and none is late (the common case: nothing
// to allocate).
func (l *Locker) settleLate(replies []nodeReply, keys []string, owner string, chosen int64, asked []int) *redlockHold {
	var late []int
	for i, r := range replies {
		if r.pending != nil {
			late = append(late, i)
		}
	}
	if len(late) == 0 {
		if asked == nil {
			return nil
		}
		return &redlockHold{asked: asked}
	}
	settled := make(chan struct{})
	h := &redlockHold{asked: asked, settled: settled, lateNodes: late, lateDone: make([]atomic.Bool, len(l.nodes))}
	lateNodes, lateDone, chosenStr := h.lateNodes, h.lateDone, strconv.FormatInt(chosen, 10)
	l.goBg(func() {
		defer close(settled)
		for _, i := range lateNodes {
			r := replies[i]
			err := <-r.pending
			if v := *r.late; err == nil && len(v) == 3 && v[0] != 0 && v[1] != chosen {
				ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
				_ = redisproto.RaiseScript.Run(ctx, l.nodes[i], keys, owner, chosenStr).Err()
				cancel()
			}
			lateDone[i].Store(true)
		}
	})
	return h
}

// redlockGiveBack releases a failed attempt's partial acquisitions: exactly
// (owner and token) on the nodes that granted it; on nodes that did not
// answer, after their call ended, by owner, when the owner id is this
// attempt's own (an explicit WithOwner id may hold the lock elsewhere; its
// lease runs out instead).
func (l *Locker) redlockGiveBack(lockKey, owner string, explicitOwner bool, voters []int, tokens []int64, replies []nodeReply) {
	keys := []string{lockKey, redisproto.ChannelOf(lockKey)}
	for _, i := range voters {
		c, tok := l.nodes[i], strconv.FormatInt(tokens[i], 10)
		l.afterward(nil, func(ctx context.Context) {
			_ = redisproto.ReleaseScript.Run(ctx, c, keys[:1], l.releaseArgs(owner, tok, 0)...).Err()
		})
	}
	if explicitOwner {
		return
	}
	for i, r := range replies {
		if r.pending == nil {
			continue
		}
		c := l.nodes[i]
		l.afterward(r.pending, func(ctx context.Context) {
			_ = redisproto.AbandonScript.Run(ctx, c, keys, owner, l.keyTTL(0), l.publish).Err()
		})
	}
}
