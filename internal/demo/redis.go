// Package demo holds what the examples share: where their Redis comes from.
package demo

import (
	"fmt"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
)

// Redis returns a client factory for url (REDIS_URL), or, when url is empty,
// for an embedded in-process Redis (miniredis) that needs nothing installed.
// where says which, for the demo's header; stop ends the embedded server.
// Each call of newClient makes a client of its own, as a separate process
// would have.
func Redis(url string) (newClient func() redis.UniversalClient, where string, stop func(), err error) {
	if url != "" {
		opts, err := redis.ParseURL(url)
		if err != nil {
			return nil, "", nil, fmt.Errorf("REDIS_URL: %w", err)
		}
		return func() redis.UniversalClient { return redis.NewClient(opts) }, "REDIS_URL (" + opts.Addr + ")", func() {}, nil
	}
	mr, err := miniredis.Run()
	if err != nil {
		return nil, "", nil, fmt.Errorf("embedded redis: %w", err)
	}
	return func() redis.UniversalClient { return redis.NewClient(&redis.Options{Addr: mr.Addr()}) },
		"embedded in this process (set REDIS_URL to use a real server)", mr.Close, nil
}
