package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
)

// newRedis returns a client factory for url (REDIS_URL), or, when url is
// empty, for an embedded in-process Redis (miniredis) that needs nothing
// installed. where says which, for the start-up log; stop ends the
// embedded server. Each call of newClient makes a client of its own, as a
// separate process would have. Every client applies context deadlines to
// its sockets (ContextTimeoutEnabled): a hung Redis then costs a call its
// deadline, not the client's ReadTimeout.
//
// A server named by url must answer a PING within a few seconds; if it does
// not, newRedis returns an error that names its address and the cause.
func newRedis(ctx context.Context, url string) (newClient func() redis.UniversalClient, where string, stop func(), err error) {
	if url != "" {
		opts, err := redis.ParseURL(url)
		if err != nil {
			return nil, "", nil, fmt.Errorf("REDIS_URL: %w", err)
		}
		opts.ContextTimeoutEnabled = true
		if err := pingRedis(ctx, *opts); err != nil {
			return nil, "", nil, fmt.Errorf("cannot reach Redis at %s: %w (unset REDIS_URL to use the embedded Redis)", opts.Addr, err)
		}
		return func() redis.UniversalClient { return redis.NewClient(opts) }, "REDIS_URL (" + opts.Addr + ")", func() {}, nil
	}
	mr, err := miniredis.Run()
	if err != nil {
		return nil, "", nil, fmt.Errorf("embedded redis: %w", err)
	}
	return func() redis.UniversalClient {
			return redis.NewClient(&redis.Options{Addr: mr.Addr(), ContextTimeoutEnabled: true})
		},
		"embedded in this process (set REDIS_URL to use a real server)", mr.Close, nil
}

// checkTimeout bounds the check that the server named by REDIS_URL answers.
const checkTimeout = 3 * time.Second

// pingRedis sends one PING, once, within checkTimeout, with a client of its
// own that honours the deadline for dialling and reading alike.
func pingRedis(ctx context.Context, opts redis.Options) error {
	ctx, cancel := context.WithTimeout(ctx, checkTimeout)
	defer cancel()
	opts.MaxRetries, opts.DialerRetries = -1, 1 // a refused dial is an answer
	c := redis.NewClient(&opts)
	defer c.Close()
	err := c.Ping(ctx).Err()
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, os.ErrDeadlineExceeded) {
		return fmt.Errorf("no answer within %v: %w", checkTimeout, err)
	}
	return err
}
