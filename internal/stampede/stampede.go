// Package stampede runs the bench module's cache-stampede scenario
// (BenchmarkStampede): a burst of identical requests over several replicas
// of a service whose origin is slow, with no protection, with per-replica
// singleflight, and with httplock. examples/stampede runs the same burst
// from files of its own, so that a reader can copy it whole; a change to
// one belongs in the other.
package stampede

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"golang.org/x/sync/singleflight"

	httplock "github.com/redfence/redfence/middleware/http"
	"github.com/redfence/redfence/mutex"
)

// Mode is the protection in front of the origin.
type Mode string

const (
	None         Mode = "no protection"
	Singleflight Mode = "singleflight per replica"
	Redfence     Mode = "redfence httplock"
)

// Modes lists the modes in the order the demo shows them.
var Modes = []Mode{None, Singleflight, Redfence}

// Config describes one burst.
type Config struct {
	Replicas    int           // service replicas, each with its own Redis client and Locker
	Requests    int           // concurrent identical requests, spread over the replicas
	OriginDelay time.Duration // how long the origin takes to compute the page
	// NewClient makes a Redis client for one replica (Redfence mode only).
	// Each replica gets its own, as separate processes would.
	NewClient func() redis.UniversalClient
	// Progress, if set, is called as requests complete.
	Progress func(done, total int)
}

// Result is what one burst cost.
type Result struct {
	Mode        Mode
	OriginCalls int64
	P50, P99    time.Duration
	Max         time.Duration
	Errors      int
}

// Run fires cfg.Requests identical GETs at once over cfg.Replicas replicas
// protected by mode, and reports the origin calls and client latencies.
func Run(ctx context.Context, mode Mode, cfg Config) (Result, error) {
	if cfg.Replicas < 1 || cfg.Requests < 1 {
		return Result{}, errors.New("stampede: need at least one replica and one request")
	}
	if mode == Redfence && cfg.NewClient == nil {
		return Result{}, errors.New("stampede: redfence mode needs NewClient")
	}
	var calls atomic.Int64
	origin := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		t := time.NewTimer(cfg.OriginDelay) // the slow backend
		defer t.Stop()
		select {
		case <-t.C:
		case <-r.Context().Done():
			http.Error(w, "cancelled", http.StatusServiceUnavailable)
			return
		}
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		fmt.Fprintf(w, "the expensive report for %s\n", r.URL.RequestURI())
	})

	// A fresh URL per run: a response shared by an earlier run on the
	// same Redis must not answer this one.
	runID := strconv.FormatUint(rand.Uint64(), 36)
	var (
		urls    []string
		closers []func()
	)
	defer func() {
		for _, c := range slices.Backward(closers) {
			c()
		}
	}()
	for range cfg.Replicas {
		var h http.Handler
		switch mode {
		case None:
			h = origin
		case Singleflight:
			h = perReplicaSingleflight(origin)
		case Redfence:
			c := cfg.NewClient()
			l := mutex.New(c)
			closers = append(closers, func() { _ = l.Close(); _ = c.Close() })
			mw, err := httplock.New(l, httplock.WithWaitTimeout(10*time.Second), httplock.WithLockAge(10*time.Second))
			if err != nil {
				return Result{}, err
			}
			h = mw(origin)
		default:
			return Result{}, fmt.Errorf("stampede: unknown mode %q", mode)
		}
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return Result{}, err
		}
		srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
		var served sync.WaitGroup
		served.Go(func() { _ = srv.Serve(ln) })
		closers = append(closers, func() { _ = srv.Close(); served.Wait() })
		urls = append(urls, "http://"+ln.Addr().String()+"/report?run="+runID)
	}

	tr := &http.Transport{MaxIdleConnsPerHost: cfg.Requests}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: 30 * time.Second}
	// Warm up as a running service would be: connections to Redis open,
	// scripts loaded. One request per replica, on another URL.
	for _, u := range urls {
		if err := fetch(ctx, client, u+"&warmup=1"); err != nil {
			return Result{}, fmt.Errorf("warm-up: %w", err)
		}
	}
	calls.Store(0)

	lat := make([]time.Duration, cfg.Requests)
	failed := make([]bool, cfg.Requests)
	var done atomic.Int64
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range cfg.Requests {
		wg.Go(func() {
			<-start
			t0 := time.Now()
			failed[i] = fetch(ctx, client, urls[i%len(urls)]) != nil
			lat[i] = time.Since(t0)
			n := done.Add(1)
			if cfg.Progress != nil {
				cfg.Progress(int(n), cfg.Requests)
			}
		})
	}
	close(start)
	wg.Wait()

	res := Result{Mode: mode, OriginCalls: calls.Load()}

	for _, f := range failed {
		if f {
			res.Errors++
		}
	}
	slices.Sort(lat)
	res.P50 = lat[len(lat)*50/100]
	res.P99 = lat[min(len(lat)-1, len(lat)*99/100)]
	res.Max = lat[len(lat)-1]
	return res, nil
}

// serviceHost is the one name clients reach every replica under, as through
// a load balancer: httplock keys on the Host, so requests sent to each
// replica's own address would be four different sites.
const serviceHost = "stampede.example"

func fetch(ctx context.Context, c *http.Client, url string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	req.Host = serviceHost
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("status %d", resp.StatusCode)
	}
	return nil
}

// perReplicaSingleflight is what most services do today: collapse identical
// requests inside one process (x/sync/singleflight), so each replica still
// calls the origin once.
func perReplicaSingleflight(next http.Handler) http.Handler {
	var g singleflight.Group
	type response struct {
		status int
		header http.Header
		body   []byte
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		v, _, _ := g.Do(r.URL.RequestURI(), func() (any, error) {
			rec := &recorder{header: http.Header{}, status: http.StatusOK}
			next.ServeHTTP(rec, r)
			return response{rec.status, rec.header, rec.body.Bytes()}, nil
		})
		resp := v.(response)
		for k, vs := range resp.header {
			w.Header()[k] = slices.Clone(vs)
		}
		w.WriteHeader(resp.status)
		_, _ = w.Write(resp.body)
	})
}

type recorder struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (r *recorder) Header() http.Header         { return r.header }
func (r *recorder) WriteHeader(code int)        { r.status = code }
func (r *recorder) Write(p []byte) (int, error) { return r.body.Write(p) }
