package redisinspect

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/redfence/redfence/mutex/backend"
	"github.com/redfence/redfence/redis/internal/redisproto"
)

// Redlock's view of a key: what a quorum of nodes agree on.

// proposalLead is how far ahead of its clock a Redlock client proposes its
// token (the driver's constant): a token read as a time is read back by it.
const proposalLead = 100 * time.Millisecond

// quorumView: held when a quorum hold key for one owner and token, with the
// lease the quorum-th longest of them leaves; otherwise free, with the
// highest token any node remembers.
func (in *Inspector) quorumView(key, name string, views []nodeView) (backend.KeyState, error) {
	nodes := make([]backend.NodeState, len(views))
	answered := 0
	for i := range views {
		nodes[i] = backend.NodeState{Node: i, Addr: in.addrs[i], Err: views[i].err}
		if views[i].err == nil {
			nodes[i].State = views[i].state(key, name)
			answered++
		}
	}
	quorum := in.cfg.Quorum
	if answered < quorum {
		return backend.KeyState{Key: key, Name: name, Nodes: nodes}, unavailable(fmt.Errorf("%d of %d nodes answered, %d needed: %w", answered, len(views), quorum, nodeErrors(nodes)))
	}
	type holder struct {
		owner string
		token int64
	}
	groups := map[holder][]int{}
	free := backend.KeyState{Key: key, Name: name, Nodes: nodes}
	for i, n := range nodes {
		if n.Err != nil {
			continue
		}
		if taken(n.State) {
			h := holder{n.State.Owner, n.State.Token}
			groups[h] = append(groups[h], i)
		}
		free.Token = max(free.Token, n.State.Token)
		if free.Now.IsZero() {
			free.Now = n.State.Now
		}
	}
	for _, idx := range groups {
		if len(idx) >= quorum {
			return in.majorityView(nodes, idx), nil
		}
	}
	free.Forced = mergeForced(nodes)
	if unanswered := len(nodes) - answered; largest(groups)+unanswered >= quorum {
		// The nodes that did not answer may hold it with those that do:
		// free is not known, and held is not either.
		return free, unavailable(fmt.Errorf("%d of %d nodes answered, and they cannot tell whether a majority holds %q: %w",
			answered, len(nodes), key, nodeErrors(nodes)))
	}
	return free, nil
}

// majorityView is the state of the quorum idx of nodes that agree on a
// holder: the lease the quorum-th longest of them leaves.
func (in *Inspector) majorityView(nodes []backend.NodeState, idx []int) backend.KeyState {
	leases := make([]time.Duration, len(idx))
	for j, i := range idx {
		leases[j] = nodes[i].State.Lease
	}
	slices.Sort(leases)
	slices.Reverse(leases)
	st := nodes[idx[0]].State
	st.Lease = leases[in.cfg.Quorum-1]
	st.Forced = mergeForced(nodes)
	if at := redisproto.MicroTime(strconv.FormatInt(st.Token, 10)); st.AcquiredAt.IsZero() && !at.IsZero() {
		// A Redlock token is mostly the proposal: the acquiring client's
		// clock, proposalLead ahead.
		st.AcquiredAt = at.Add(-proposalLead)
	}
	st.Nodes = nodes
	return st
}

// largest is the size of the largest group of nodes that agree on a holder.
func largest[K comparable](groups map[K][]int) int {
	n := 0
	for _, idx := range groups {
		n = max(n, len(idx))
	}
	return n
}

// nodeErrors joins the errors of the nodes that did not answer.
func nodeErrors(nodes []backend.NodeState) error {
	var errs []error
	for _, n := range nodes {
		if n.Err != nil {
			errs = append(errs, fmt.Errorf("node %d (%s): %w", n.Node, n.Addr, n.Err))
		}
	}
	return errors.Join(errs...)
}

// mergeForced is the forced releases the nodes recorded, each once (a
// forced release writes an entry on every node that freed the key), latest
// first.
func mergeForced(nodes []backend.NodeState) []backend.ForceRecord {
	type id struct {
		token, floor int64
		by, reason   string
	}
	seen := map[id]bool{}
	var out []backend.ForceRecord
	for _, n := range nodes {
		for _, f := range n.State.Forced {
			k := id{f.Token, f.Floor, f.By, f.Reason}
			if !seen[k] {
				seen[k] = true
				out = append(out, f)
			}
		}
	}
	slices.SortStableFunc(out, func(a, b backend.ForceRecord) int { return b.At.Compare(a.At) })
	if len(out) > inspectForced {
		out = out[:inspectForced]
	}
	return out
}
