package mutex

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/redfence/redfence/mutex/internal/redisproto"
)

// Redlock's view of a key: what a majority of nodes agree on.

// quorumView: Held when a majority hold key for one owner and token, with
// the lease the quorum-th longest of them leaves; otherwise free, with the
// highest token any node remembers.
func (l *Locker) quorumView(key, name string, views []nodeView) (LockInfo, error) {
	nodes := make([]NodeInfo, len(views))
	answered := 0
	for i := range views {
		nodes[i] = NodeInfo{Node: i, Addr: l.addrs[i], Err: views[i].err}
		if views[i].err == nil {
			nodes[i].Info = views[i].info(key, name)
			answered++
		}
	}
	if answered < l.quorum {
		return LockInfo{Key: key, Name: name, Nodes: nodes}, unavailable(fmt.Errorf("%d of %d nodes answered, %d needed: %w", answered, len(views), l.quorum, nodeErrors(nodes)))
	}
	type holder struct {
		owner string
		token int64
	}
	groups := map[holder][]int{}
	var best LockInfo
	for i, n := range nodes {
		if n.Err != nil {
			continue
		}
		if n.Info.State != Free {
			h := holder{n.Info.Owner, n.Info.Token}
			groups[h] = append(groups[h], i)
		}
		if n.Info.Token > best.Token {
			best.Token = n.Info.Token
		}
		if best.ServerTime.IsZero() {
			best.ServerTime = n.Info.ServerTime
		}
	}
	for _, idx := range groups {
		if len(idx) >= l.quorum {
			return l.majorityView(nodes, idx), nil
		}
	}
	free := LockInfo{Key: key, Name: name, Token: best.Token, ServerTime: best.ServerTime, Forced: mergeForced(nodes), Nodes: nodes}
	if unanswered := len(nodes) - answered; largest(groups)+unanswered >= l.quorum {
		// The nodes that did not answer may hold it with those that do:
		// free is not known, and held is not either.
		return free, unavailable(fmt.Errorf("%d of %d nodes answered, and they cannot tell whether a majority holds %q: %w",
			answered, len(nodes), key, nodeErrors(nodes)))
	}
	return free, nil
}

// majorityView is the LockInfo of the quorum idx of nodes that agree on a
// holder: the lease the quorum-th longest of them leaves.
func (l *Locker) majorityView(nodes []NodeInfo, idx []int) LockInfo {
	leases := make([]time.Duration, len(idx))
	for j, i := range idx {
		leases[j] = nodes[i].Info.Lease
	}
	slices.Sort(leases)
	slices.Reverse(leases)
	in := nodes[idx[0]].Info
	in.Lease = leases[l.quorum-1]
	in.Forced = mergeForced(nodes)
	if at := redisproto.MicroTime(strconv.FormatInt(in.Token, 10)); in.AcquiredAt.IsZero() && !at.IsZero() {
		// A Redlock token is mostly the proposal: the acquiring
		// client's clock, proposalLead ahead.
		in.AcquiredAt = at.Add(-proposalLead)
	}
	in.Nodes = nodes
	return in
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
func nodeErrors(nodes []NodeInfo) error {
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
func mergeForced(nodes []NodeInfo) []ForcedRelease {
	type id struct {
		token, floor int64
		by, reason   string
	}
	seen := map[id]bool{}
	var out []ForcedRelease
	for _, n := range nodes {
		for _, f := range n.Info.Forced {
			k := id{f.Token, f.Floor, f.By, f.Reason}
			if !seen[k] {
				seen[k] = true
				out = append(out, f)
			}
		}
	}
	slices.SortStableFunc(out, func(a, b ForcedRelease) int { return b.At.Compare(a.At) })
	if len(out) > inspectForced {
		out = out[:inspectForced]
	}
	return out
}
