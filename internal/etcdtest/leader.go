package etcdtest

import (
	"fmt"
	"testing"
	"time"
)

// leaderPoll is how often leader asks the members whom they follow.
const leaderPoll = 5 * time.Millisecond

// Leader returns the member that every running member follows, waiting for
// an election in progress; the test fails when none is agreed on within
// readyWithin.
func (c *Cluster) Leader(t testing.TB) *Member {
	t.Helper()
	m, err := c.WaitLeader()
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// WaitLeader is Leader for a goroutine other than the test's, which must
// not call t.Fatal: it returns an error when no leader is agreed on within
// readyWithin.
func (c *Cluster) WaitLeader() (*Member, error) {
	return c.leader(time.Now().Add(readyWithin))
}

// Follower returns a running member that is not the leader.
func (c *Cluster) Follower(t testing.TB) *Member {
	t.Helper()
	lead := c.Leader(t)
	for _, m := range c.Members {
		if m != lead && m.Running() {
			return m
		}
	}
	t.Fatal("etcdtest: no running follower")
	return nil
}

// KillLeader kills the leader and returns it, once the running members
// agree on another (when a majority of them is left).
func (c *Cluster) KillLeader(t testing.TB) *Member {
	t.Helper()
	old := c.Leader(t)
	old.Kill()
	if c.majority() {
		c.Leader(t)
	}
	return old
}

// RestartMember restarts m, failing the test when it cannot.
func (c *Cluster) RestartMember(t testing.TB, m *Member) {
	t.Helper()
	if err := c.Restart(m); err != nil {
		t.Fatal(err)
	}
}

// majority says whether a majority of the members runs.
func (c *Cluster) majority() bool {
	n := 0
	for _, m := range c.Members {
		if m.Running() {
			n++
		}
	}
	return 2*n > len(c.Members)
}

// leader polls the running members until they all follow one of them: the
// raft state is in memory, and etcd offers no notification of an election
// that every member has seen.
func (c *Cluster) leader(deadline time.Time) (*Member, error) {
	tick := time.NewTicker(leaderPoll)
	defer tick.Stop()
	for {
		if m := c.agreed(); m != nil {
			return m, nil
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("%w within %v", errNoLeader, readyWithin)
		}
		<-tick.C
	}
}

// agreed is the running member every running member follows, or nil.
func (c *Cluster) agreed() *Member {
	var lead *Member
	for _, m := range c.Members {
		e := m.etcd()
		if e == nil {
			continue
		}
		id := e.Server.Leader()
		if id == 0 || lead != nil && lead.id() != id {
			return nil
		}
		if lead == nil {
			for _, x := range c.Members {
				if x.id() == id {
					lead = x
				}
			}
			if lead == nil {
				return nil
			}
		}
	}
	return lead
}
