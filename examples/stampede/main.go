// Command stampede shows a cache stampede and what redfence does about it.
//
// A burst of identical requests hits several replicas of a service whose
// origin is slow. Without protection every request calls the origin; with
// per-replica singleflight each replica still calls it once; with httplock
// the replicas share one call through Redis.
//
//	go run ./examples/stampede                   # embedded Redis, nothing to set up
//	REDIS_URL=redis://127.0.0.1:6379/0 go run ./examples/stampede
//
// What a service does to use httplock is withHTTPLock, below; package burst
// is the load and the baseline, redis.go where Redis comes from.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redfence/redfence/examples/embedded"
	"github.com/redfence/redfence/examples/stampede/burst"
	"github.com/redfence/redfence/mutex"
	httplock "github.com/redfence/redfence/redis/httplock"
	"github.com/redfence/redfence/redis/redisdriver"
)

// withHTTPLock is all a replica needs to share one origin call with the
// others: a Locker over a driver of its Redis client (one per process) and
// the middleware around its handler. The client should apply context deadlines
// to its sockets (go-redis's ContextTimeoutEnabled, as redis.go sets it).
//
// Identical requests collapse when their key is: the method, the URL and
// the Host (with the forwarding headers). So the replicas must be reached
// under one name, as through a load balancer: requests sent to each
// replica's own address are different sites to httplock, each with its own
// origin call (the burst sends Host: stampede.example to every replica).
func withHTTPLock(rdb redis.UniversalClient, origin http.Handler) (http.Handler, func(), error) {
	drv, err := redisdriver.New(rdb)
	if err != nil {
		return nil, nil, err
	}
	locker, err := mutex.New(drv) // the Locker owns drv; rdb stays ours
	if err != nil {
		_ = drv.Close()
		return nil, nil, err
	}
	mw, err := httplock.New(locker,
		// The burst keeps the origin busy for longer than the default
		// waits allow on a small machine.
		httplock.WithWait(10*time.Second), httplock.WithTTL(10*time.Second))
	if err != nil {
		_ = locker.Close()
		return nil, nil, err
	}
	return mw(origin), func() { _ = locker.Close() }, nil
}

type options struct {
	replicas int
	requests int
	delay    time.Duration
	redisURL string
}

func main() {
	var o options
	flag.IntVar(&o.replicas, "replicas", 4, "service replicas")
	flag.IntVar(&o.requests, "requests", 1000, "identical requests in the burst")
	flag.DurationVar(&o.delay, "delay", 300*time.Millisecond, "time the origin takes per call")
	flag.Parse()
	o.redisURL = os.Getenv("REDIS_URL")

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	var bar io.Writer = os.Stderr
	if fi, err := os.Stderr.Stat(); err != nil || fi.Mode()&os.ModeCharDevice == 0 {
		bar = io.Discard // not a terminal: no progress bar in logs
	}
	results, err := run(ctx, os.Stdout, bar, o)
	if err != nil {
		fmt.Fprintln(os.Stderr, "stampede:", err)
		os.Exit(1)
	}
	if !conclude(os.Stdout, o, results) {
		os.Exit(2) // the run did not show what the demo is for
	}
}

// run checks the Redis server, runs the three bursts and prints the table on
// stdout and a progress bar on bar; it returns the results, in the order of
// burst.Modes, for conclude.
func run(ctx context.Context, stdout, bar io.Writer, o options) ([]burst.Result, error) {
	newClient, where, closeRedis, err := embedded.Redis(ctx, o.redisURL)
	if err != nil {
		return nil, err
	}
	defer closeRedis()

	fmt.Fprintf(stdout, "redfence stampede demo: %d identical requests at once over %d replicas;\n", o.requests, o.replicas)
	fmt.Fprintf(stdout, "the origin takes %v per call. Redis: %s.\n\n", o.delay, where)

	cfg := burst.Config{Replicas: o.replicas, Requests: o.requests, OriginDelay: o.delay, NewClient: newClient, HTTPLock: withHTTPLock}
	var results []burst.Result
	for _, mode := range burst.Modes {
		cfg.Progress = progress(bar, string(mode))
		res, err := burst.Run(ctx, mode, cfg)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", mode, err)
		}
		results = append(results, res)
	}
	fmt.Fprintf(bar, "\r%s\r", strings.Repeat(" ", 72))

	fmt.Fprintf(stdout, "%-26s %13s %10s %10s %8s\n", "protection", "origin calls", "p50", "p99", "errors")
	for _, r := range results {
		fmt.Fprintf(stdout, "%-26s %13d %10s %10s %8d\n", r.Mode, r.OriginCalls, ms(r.P50), ms(r.P99), r.Errors)
	}
	return results, nil
}

// conclude prints what results show, computed from them alone, and reports
// whether they show what the demo is for: one origin call with redfence and
// no failed request.
func conclude(w io.Writer, o options, results []burst.Result) bool {
	fmt.Fprintln(w)
	by := map[burst.Mode]burst.Result{}
	failed := 0
	for _, r := range results {
		by[r.Mode] = r
		if r.Errors > 0 {
			failed += r.Errors
			fmt.Fprintf(w, "%d of the %d requests failed with %s.\n", r.Errors, o.requests, r.Mode)
		}
	}
	none, sf, rf := by[burst.None], by[burst.Singleflight], by[burst.Redfence]
	if rf.OriginCalls != 1 {
		fmt.Fprintf(w, "With redfence the %d replicas made %d origin calls between them, not 1: the lock\n", o.replicas, rf.OriginCalls)
		fmt.Fprintln(w, "did not collapse the burst in this run, so it does not show what the demo is for.")
		return false
	}
	fmt.Fprintf(w, "With redfence the %d replicas made 1 origin call between them: the first\n", o.replicas)
	fmt.Fprintln(w, "request took the key's lock and called the origin; the others were woken by one")
	fmt.Fprintln(w, "publication and read the shared response from Redis (package httplock).")
	fmt.Fprintf(w, "The origin's load is the point: 1 call instead of %d with singleflight per replica\n", sf.OriginCalls)
	fmt.Fprintf(w, "and %d without protection.\n", none.OriginCalls)
	if rf.P50 > sf.P50 {
		fmt.Fprintf(w, "Latency: redfence's p50 is %s above singleflight's. The replicas and the\n", ms(rf.P50-sf.P50))
		fmt.Fprintln(w, "clients share this one process, so redfence's extra Redis round trips compete")
		fmt.Fprintln(w, "with the burst for the same CPUs.")
	}
	return failed == 0
}

// progress draws a bar on w, at most every few percent.
func progress(w io.Writer, label string) func(done, total int) {
	var mu sync.Mutex
	last := -1
	return func(done, total int) {
		pct := done * 100 / total
		mu.Lock()
		defer mu.Unlock()
		if pct/5 == last/5 && done != total {
			return
		}
		last = pct
		bar := strings.Repeat("#", pct/5) + strings.Repeat(".", 20-pct/5)
		fmt.Fprintf(w, "\r  %-26s [%s] %d/%d", label, bar, done, total)
	}
}

func ms(d time.Duration) string { return fmt.Sprintf("%.1f ms", float64(d)/float64(time.Millisecond)) }
