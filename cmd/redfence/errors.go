package main

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

	"github.com/redfence/redfence/mutex"
)

// explain words err, returned by a call of c's Locker under a ctx bounded
// by timeout, for an operator: which server, and what went wrong, without
// the layers of wrapping. Bad input becomes a usage error.
func (c *conn) explain(err error, timeout time.Duration) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, mutex.ErrInvalid):
		return usagef("", "%s", trimSentinel(err.Error(), mutex.ErrInvalid))
	case errors.Is(err, context.Canceled):
		return errors.New("interrupted")
	case c.redlock() && errors.Is(err, mutex.ErrUnavailable):
		return fmt.Errorf("cannot reach enough Redlock nodes (%s): %s", c.addrs(), plain(err, timeout))
	case c.redlock():
		return fmt.Errorf("the Redlock nodes %s: %s", c.addrs(), plain(err, timeout))
	case isTimeout(err):
		return fmt.Errorf("%s did not answer within %v", c.servers[0].where(), timeout)
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
		return fmt.Errorf("cannot reach %s at %s: %s", what, addr, netWords(op))
	}
	if errors.Is(err, mutex.ErrUnavailable) {
		return fmt.Errorf("%s failed: %s", s.where(), plain(err, timeout))
	}
	return errors.New(plain(err, timeout))
}

// addrs lists the servers' addresses: "a, b, c".
func (c *conn) addrs() string {
	var all []string
	for _, s := range c.servers {
		all = append(all, s.addrs...)
	}
	return strings.Join(all, ", ")
}

// plain is err's message without mutex's prefixes, each network error in
// it said in a few words, and joined errors on one line.
func plain(err error, timeout time.Duration) string {
	msg := err.Error()
	walk(err, func(e error) {
		op, ok := e.(*net.OpError)
		if !ok {
			return
		}
		words := netWords(op)
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
	if isTimeout(err) {
		msg = strings.ReplaceAll(msg, context.DeadlineExceeded.Error(), fmt.Sprintf("no answer within %v", timeout))
	}
	for _, s := range []error{mutex.ErrUnavailable, mutex.ErrNotHeld, mutex.ErrNotAcquired} {
		msg = strings.ReplaceAll(msg, s.Error()+": ", "")
	}
	return strings.ReplaceAll(msg, "\n", "; ")
}

// netWords says what a network error was.
func netWords(op *net.OpError) string {
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

// isTimeout reports whether err is a deadline that passed.
func isTimeout(err error) bool {
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

// trimSentinel removes a sentinel's "pkg: text: " head from msg.
func trimSentinel(msg string, sentinel error) string {
	return strings.TrimPrefix(msg, sentinel.Error()+": ")
}
