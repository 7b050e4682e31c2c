package cli

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redfence/redfence/mutex"
)

// Explain words err, returned by a call of c's Locker that ran for
// elapsed, for an operator: which server, what went wrong, and how long it
// waited, without the layers of wrapping.
func (c *conn) Explain(err error, elapsed time.Duration) error {
	var answer redis.Error
	switch {
	case c.redlock() && errors.Is(err, mutex.ErrUnavailable):
		return fmt.Errorf("cannot reach enough Redlock nodes (%s): %s", c.addrs(), Plain(err, elapsed))
	case c.redlock():
		return fmt.Errorf("the Redlock nodes %s: %s", c.addrs(), Plain(err, elapsed))
	case errors.As(err, &answer):
		return fmt.Errorf("%s answered: %s", c.node(err), Plain(err, elapsed))
	case IsTimeout(err):
		return fmt.Errorf("%s did not answer: gave up after %v", c.node(err), elapsed.Round(10*time.Millisecond))
	}
	s := c.servers[0]
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		addr := s.addrs[0] // a name that did not resolve has no address yet
		if op.Addr != nil {
			addr = op.Addr.String()
		}
		what := "Redis"
		if s.kind == sentinel && slices.Contains(s.addrs, addr) {
			what = "Sentinel"
		}
		return fmt.Errorf("cannot reach %s at %s: %s", what, addr, NetWords(op))
	}
	if errors.Is(err, mutex.ErrUnavailable) {
		return fmt.Errorf("%s failed: %s", s.where(), Plain(err, elapsed))
	}
	return errors.New(Plain(err, elapsed))
}

// node names the server err came from: the address a network error names
// (a Cluster's node, say), else the server of the URL.
func (c *conn) node(err error) string {
	var op *net.OpError
	s := c.servers[0]
	if errors.As(err, &op) && op.Addr != nil && s.kind != standalone {
		return "Redis at " + op.Addr.String() + " (" + s.where() + ")"
	}
	return s.where()
}

// addrs lists the servers' addresses: "a, b, c".
func (c *conn) addrs() string {
	var all []string
	for _, s := range c.servers {
		all = append(all, s.addrs...)
	}
	return strings.Join(all, ", ")
}

// Plain is err's message without mutex's prefixes, each network error in
// it said in a few words, a passed deadline as the time waited, and joined
// errors on one line.
func Plain(err error, elapsed time.Duration) string {
	msg := err.Error()
	walk(err, func(e error) {
		op, ok := e.(*net.OpError)
		if !ok {
			return
		}
		words := NetWords(op)
		if op.Addr == nil {
			msg = strings.ReplaceAll(msg, op.Error(), words)
			return
		}
		// Said once where the message names the address already.
		addr := op.Addr.String()
		msg = strings.ReplaceAll(msg, addr+"): "+op.Error(), addr+"): "+words)
		msg = strings.ReplaceAll(msg, addr+": "+op.Error(), addr+": "+words)
		msg = strings.ReplaceAll(msg, op.Error(), "cannot reach "+addr+": "+words)
	})
	if IsTimeout(err) {
		msg = strings.ReplaceAll(msg, context.DeadlineExceeded.Error(), fmt.Sprintf("no answer after %v", elapsed.Round(10*time.Millisecond)))
	}
	for _, s := range []error{mutex.ErrUnavailable, mutex.ErrNotHeld, mutex.ErrNotAcquired} {
		msg = strings.ReplaceAll(msg, s.Error()+": ", "")
	}
	return strings.ReplaceAll(msg, "\n", "; ")
}

// NetWords says what a network error was.
func NetWords(op *net.OpError) string {
	var dns *net.DNSError
	switch {
	case errors.Is(op, syscall.ECONNREFUSED):
		return "connection refused"
	case errors.Is(op, syscall.ECONNRESET):
		return "connection reset"
	case errors.As(op, &dns) && dns.IsNotFound:
		return "no such host"
	case op.Timeout():
		return "no answer in time"
	}
	if op.Err != nil {
		return op.Err.Error()
	}
	return op.Error()
}

// IsTimeout reports whether err is a deadline that passed.
func IsTimeout(err error) bool {
	var ne net.Error
	return errors.Is(err, context.DeadlineExceeded) || errors.Is(err, os.ErrDeadlineExceeded) ||
		(errors.As(err, &ne) && ne.Timeout())
}

// walk calls fn on err and every error it wraps.
func walk(err error, fn func(error)) {
	if err == nil {
		return
	}
	fn(err)
	switch u := err.(type) {
	case interface{ Unwrap() error }:
		walk(u.Unwrap(), fn)
	case interface{ Unwrap() []error }:
		for _, e := range u.Unwrap() {
			walk(e, fn)
		}
	}
}

// trimInvalid removes the head of a bad-input error from msg: "mutex:
// redfence: invalid argument: " or "redisdriver: invalid argument: ", the
// package's words and the sentinel's, which an operator does not need.
func trimInvalid(msg string) string {
	if _, detail, ok := strings.Cut(msg, "invalid argument: "); ok {
		return detail
	}
	return msg
}
