package redlockdriver

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/redfence/redfence/mutex/backend"
	"github.com/redfence/redfence/redis/internal/redisproto"
)

// proposalLead is how far ahead of the driver's clock an attempt proposes
// its token: enough to cover the one-way latency and the clock differences
// between this host and the nodes, so that nodes usually take the
// proposal. A node that issues more instead only costs the raise round.
const proposalLead = 100 * time.Millisecond

// Acquire is one Redlock attempt: acquire on every node, and with a
// majority inside the validity (a.TTL − elapsed − drift), raise the
// majority's tokens to the highest and require a majority to confirm.
// Otherwise it gives back what it took, in the background and after each
// node's call ended, and reports contention (Held, with a
// *QuorumError in Detail), or an outage: a *QuorumError
// matching backend.ErrUnavailable, when too few nodes answered to tell or
// the validity ran out. Its errors match backend.ErrGivenBack: the Locker
// sends no Abandon after them. It records the span events redlock.acquire and
// redlock.token on ctx's span. Bad input returns an error wrapping
// backend.ErrInvalid, before any node is asked.
func (d *Driver) Acquire(ctx context.Context, a backend.Attempt) (backend.Grant, error) {
	if err := d.checkAttempt(ctx, a); err != nil {
		return backend.Grant{}, backend.GivenBack(err) // nothing was asked
	}
	span := trace.SpanFromContext(ctx)
	start := d.now()
	lockKey := d.name(a.Key)
	keys := []string{lockKey}
	replies, asked := d.ask(ctx, keys, a)
	v := d.tally(replies)
	validity := a.TTL - d.now().Sub(start) - a.Drift
	if span.IsRecording() {
		span.AddEvent("redlock.acquire", trace.WithAttributes(
			attribute.Int("redfence.redlock.votes", len(v.voters)),
			attribute.Int("redfence.redlock.quorum", d.quorum),
			attribute.String("redfence.redlock.nodes", strings.Join(v.outcomes, ",")),
			attribute.Float64("redfence.redlock.validity", validity.Seconds())))
	}
	if len(v.voters) >= d.quorum && validity > 0 {
		chosen, confirmed := d.confirm(ctx, span, keys, a, &v)
		validity = a.TTL - d.now().Sub(start) - a.Drift
		if confirmed >= d.quorum && validity > 0 {
			g := backend.Grant{Status: backend.Acquired, Token: chosen}
			if v.reentered >= d.quorum {
				g.Status = backend.Reentered
			}
			g.Handle = d.settleLate(replies, keys, a.Owner, chosen, asked, a.TTL)
			return g, nil
		}
	}

	// No lock: give back what this attempt took, at once, on every node.
	d.giveBack(lockKey, a.Owner, a.Shared, v.voters, v.tokens, replies)
	qerr := &QuorumError{Quorum: d.quorum, Addrs: slices.Clone(d.addrs), Nodes: v.answers, Late: len(v.voters) >= d.quorum}
	if qerr.Is(backend.ErrUnavailable) {
		return backend.Grant{}, backend.GivenBack(qerr) // the Locker need not abandon it again
	}
	return backend.Grant{Status: backend.Held, Remaining: v.remaining, Detail: qerr}, nil
}

func (d *Driver) checkAttempt(ctx context.Context, a backend.Attempt) error {
	if err := d.checkKey(a.Key); err != nil {
		return err
	}
	switch {
	case ctx == nil:
		return invalid("nil context")
	case a.Owner == "":
		return invalid("empty owner")
	case a.TTL <= 0:
		return invalid("TTL %v is not positive", a.TTL)
	}
	return nil
}

// ask runs the acquire script on every node but those resting (see
// noderest.go; asked is nil when it asked all), and stops waiting once the
// replies decide: a majority granted, or too many refused or failed for a
// majority to remain possible.
func (d *Driver) ask(ctx context.Context, keys []string, a backend.Attempt) (replies []nodeReply, asked []int) {
	ask, resting := d.askable(!a.Shared)
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
		return yes >= d.quorum || no > len(d.nodes)-d.quorum
	}
	if a.Shared {
		// An explicit owner can re-enter from anywhere, and a re-entry must
		// see one token on every node: wait for all nodes (within the node
		// timeout) so that the raise reaches each node that granted.
		decided = nil
	}
	// Propose a token a little ahead of our clock: nodes whose counter and
	// clock are behind it take it as it is, and when the whole quorum did,
	// the quorum already carries one token and the raise round is skipped.
	proposal := d.now().Add(proposalLead).UnixMicro()
	args := []any{a.Owner, a.TTL.Milliseconds(), d.keyTTL(a.TTL), proposal}
	if a.Waiter != "" {
		args = append(args, a.Waiter) // marks the lock waited-for, so that its release publishes
	}
	replies = d.fanoutUntil(ctx, d.nodeTimeoutFor(a.TTL), ask, func(ctx context.Context, c redis.UniversalClient) ([]int64, error) {
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

// votes are an attempt's replies, counted.
type votes struct {
	voters    []int         // nodes that granted
	tokens    []int64       // by node: the token it issued
	reentered int           // nodes that granted a re-entry
	remaining time.Duration // the longest lease left of another holder
	answers   []error       // by node, a QuorumError's Nodes
	outcomes  []string      // by node, for the span
}

func (d *Driver) tally(replies []nodeReply) votes {
	v := votes{tokens: make([]int64, len(d.nodes)), answers: make([]error, len(d.nodes)), outcomes: make([]string, len(d.nodes))}
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
			v.answers[i], v.outcomes[i] = errAcquireReply, "error"
		case r.vals[0] == 0:
			v.answers[i], v.outcomes[i] = backend.ErrNotAcquired, "held"
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

// confirm makes the voters carry one token, the highest any issued: when
// they issued different ones, a second round raises the others, and only
// those that confirm count.
func (d *Driver) confirm(ctx context.Context, span trace.Span, keys []string, a backend.Attempt, v *votes) (chosen int64, confirmed int) {
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
		raised := d.fanout(ctx, d.nodeTimeoutFor(a.TTL), v.voters, func(ctx context.Context, c redis.UniversalClient) ([]int64, error) {
			n, err := redisproto.RaiseScript.Run(ctx, c, keys, a.Owner, chosenStr).Int64()
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
