// Command stampede shows a cache stampede and what redfence does about it.
//
// A burst of identical requests hits several replicas of a service whose
// origin is slow. Without protection every request calls the origin; with
// per-replica singleflight each replica still calls it once; with httplock
// the replicas share one call through Redis.
//
//	go run ./examples/stampede                   # embedded Redis, nothing to set up
//	REDIS_URL=redis://127.0.0.1:6379/0 go run ./examples/stampede
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"sync"
	"time"

	"github.com/redfence/redfence/internal/demo"
	"github.com/redfence/redfence/internal/stampede"
)

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
	if _, err := run(ctx, os.Stdout, bar, o); err != nil {
		fmt.Fprintln(os.Stderr, "stampede:", err)
		os.Exit(1)
	}
}

// run runs the three bursts and prints the table on stdout and a progress
// bar on bar; it returns the results for the tests.
func run(ctx context.Context, stdout, bar io.Writer, o options) ([]stampede.Result, error) {
	newClient, where, closeRedis, err := demo.Redis(o.redisURL)
	if err != nil {
		return nil, err
	}
	defer closeRedis()

	fmt.Fprintf(stdout, "redfence stampede demo: %d identical requests at once over %d replicas;\n", o.requests, o.replicas)
	fmt.Fprintf(stdout, "the origin takes %v per call. Redis: %s.\n\n", o.delay, where)

	cfg := stampede.Config{Replicas: o.replicas, Requests: o.requests, OriginDelay: o.delay, NewClient: newClient}
	var results []stampede.Result
	for _, mode := range stampede.Modes {
		cfg.Progress = progress(bar, string(mode))
		res, err := stampede.Run(ctx, mode, cfg)
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
	fmt.Fprintf(stdout, "\nWith redfence the %d replicas made one origin call between them: the first\n", o.replicas)
	fmt.Fprintln(stdout, "request took the key's lock and called the origin; the others were woken by one")
	fmt.Fprintln(stdout, "publication and read the shared response from Redis (package httplock).")
	fmt.Fprintln(stdout, "Latency: every replica, the clients and Redis share this one process here, so")
	fmt.Fprintln(stdout, "redfence's extra Redis round trips compete with the burst for the same CPUs;")
	fmt.Fprintln(stdout, "on separate machines they cost about one round trip. The origin's load is the")
	fmt.Fprintln(stdout, "point: 1 call instead of one per replica or one per request.")
	return results, nil
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
