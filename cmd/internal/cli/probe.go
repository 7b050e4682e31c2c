package cli

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// Probe asks each server a plain URL names (one server, or a Redlock
// node) what it is, and refuses a Cluster node or a replica: through a
// Cluster node the command would see one master's keys and be redirected
// for the others, and a replica shows a lock it has not synced yet as free
// and refuses a release. A server that will not say (an ACL without INFO)
// is used as given, with a warning. A Redlock node that does not answer is
// left to the command, which needs only a majority, and is given a third
// of the timeout; the one server of a plain URL must answer.
func (c *conn) Probe(ctx context.Context, timeout time.Duration, warn func(string)) error {
	errs := make([]error, len(c.servers))
	warnings := make([]string, len(c.servers))
	if c.redlock() {
		timeout /= 3
	}
	var wg sync.WaitGroup
	for i, s := range c.servers {
		if s.kind != standalone {
			continue
		}
		wg.Go(func() {
			info, elapsed, err := serverInfo(ctx, s, timeout)
			var answer redis.Error
			switch {
			case errors.As(err, &answer):
				warnings[i] = fmt.Sprintf("%s would not say whether it is a replica or a Cluster node (%v): it is used as given", s.where(), err)
			case err != nil && !c.redlock():
				errs[i] = explain(c, err, elapsed)
			case err == nil:
				errs[i] = refuse(s, i, c.redlock(), info)
			}
		})
	}
	wg.Wait()
	for _, w := range warnings {
		if w != "" {
			warn(w)
		}
	}
	return errors.Join(errs...)
}

// serverInfo reads INFO's server, replication and cluster sections: in one
// call, or, from a server before Redis 7 that takes one section a call,
// all of the default ones.
func serverInfo(ctx context.Context, s server, timeout time.Duration) (map[string]string, time.Duration, error) {
	var info string
	elapsed, err := timed(ctx, timeout, func(ctx context.Context) (err error) {
		info, err = s.client.Info(ctx, "server", "replication", "cluster").Result()
		var answer redis.Error
		if errors.As(err, &answer) && !redis.HasErrorPrefix(err, "NOPERM") {
			info, err = s.client.Info(ctx).Result()
		}
		return err
	})
	return infoFields(info), elapsed, err
}

// refuse words why the command cannot work through server s, as INFO
// described it; nil when it can.
func refuse(s server, i int, redlock bool, info map[string]string) error {
	which := "--redis " + s.addrs[0]
	if redlock {
		which = fmt.Sprintf("--redis #%d (%s)", i+1, s.addrs[0])
	}
	switch {
	case info["cluster_enabled"] == "1" && redlock:
		return usagef("", "%s is a node of a Redis Cluster: Redlock needs independent masters", which)
	case info["cluster_enabled"] == "1":
		return usagef("", "%s is a node of a Redis Cluster: add ?cluster=true to its URL (redis://%s?cluster=true), so that every master is read", which, s.addrs[0])
	case info["role"] == "slave":
		master := net.JoinHostPort(info["master_host"], info["master_port"])
		return usagef("", "%s is a replica of %s: give the master's address (a replica shows a lock it has not synced yet as free, and refuses a release)", which, master)
	}
	return nil
}

// infoFields reads INFO's "name:value" lines.
func infoFields(info string) map[string]string {
	fields := map[string]string{}
	sc := bufio.NewScanner(strings.NewReader(info))
	for sc.Scan() {
		if k, v, ok := strings.Cut(strings.TrimSpace(sc.Text()), ":"); ok {
			fields[k] = v
		}
	}
	return fields
}

// timed runs fn under ctx bounded by timeout and returns how long it ran.
// When ctx is cancelled (Ctrl-C) it returns at once, even if fn does not:
// a client that applies ctx's deadline to its sockets still reads on after
// a cancellation, and fn then ends when its deadline passes or its client
// closes. When the timeout passes, it returns fn's own error, which says
// more (an outcome unknown, a server's words) than the deadline does.
func timed(ctx context.Context, timeout time.Duration, fn func(ctx context.Context) error) (time.Duration, error) {
	parent := ctx
	ctx, cancel := context.WithTimeout(ctx, timeout)
	start := time.Now()
	done := make(chan error, 1)
	go func() {
		defer cancel()
		done <- fn(ctx)
	}()
	select {
	case err := <-done:
		return time.Since(start), err
	case <-parent.Done():
		return time.Since(start), parent.Err()
	}
}
