package etcdstore

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/redfence/redfence/cmd/internal/cli"
)

// Probe asks every member named for its status, in parallel, each within
// a third of the timeout when there are several. It refuses a learner
// (which serves no lock) and a cluster without a leader (no lock could be
// read or released: fewer than a majority of members are up); a member it
// cannot reach is a warning while another answers, an error when none
// does. A member is first dialled plainly, so that one that refuses
// connections says so at once: etcd's client waits for a member to come
// up until the call's deadline.
func (c *conn) Probe(ctx context.Context, timeout time.Duration, warn func(string)) error {
	ms := c.store.members
	if len(ms) > 1 {
		timeout /= 3
	}
	status := make([]*clientv3.StatusResponse, len(ms))
	errs := make([]error, len(ms))
	var wg sync.WaitGroup
	for i, m := range ms {
		wg.Go(func() { status[i], errs[i] = c.status(ctx, m, timeout) })
	}
	wg.Wait()
	var reached []string
	for i, m := range ms {
		switch st := status[i]; {
		case errs[i] != nil:
			continue
		case st.IsLearner:
			return cli.Usagef("--etcd %s is a learner member, which serves no lock: give voting members", m.endpoint)
		case st.Leader == 0:
			return fmt.Errorf("etcd at %s has no leader: fewer than a majority of its members are up, and no lock can be read or released", m.addr)
		default:
			reached = append(reached, m.addr)
			for _, alarm := range st.Errors {
				warn(fmt.Sprintf("etcd at %s reports: %s", m.addr, alarm))
			}
		}
	}
	if len(reached) == 0 {
		return errors.Join(errs...)
	}
	for _, err := range errs {
		if err != nil {
			warn(err.Error() + ": the command goes on through " + strings.Join(reached, ", "))
		}
	}
	return nil
}

// status dials m plainly, then asks it for its status; its error is worded
// for an operator.
func (c *conn) status(ctx context.Context, m member, timeout time.Duration) (*clientv3.StatusResponse, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	start := time.Now()
	nc, err := new(net.Dialer).DialContext(ctx, "tcp", m.addr)
	if err == nil {
		_ = nc.Close()
		var st *clientv3.StatusResponse
		if st, err = c.client.Status(ctx, m.endpoint); err == nil {
			return st, nil
		}
	}
	var op *net.OpError
	switch {
	case errors.Is(err, context.Canceled):
		return nil, errors.New("interrupted")
	case errors.As(err, &op) && op.Op == "dial":
		return nil, fmt.Errorf("cannot reach etcd at %s: %s", m.addr, cli.NetWords(op))
	case cli.IsTimeout(err):
		return nil, fmt.Errorf("etcd at %s did not answer: gave up after %v", m.addr, time.Since(start).Round(10*time.Millisecond))
	}
	return nil, fmt.Errorf("etcd at %s: %s", m.addr, cli.Plain(err, time.Since(start)))
}
