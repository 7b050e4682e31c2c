// Package burst is the stampede demo's load: a burst of identical requests
// over replicas of a slow origin, with no protection, per-replica
// singleflight, or httplock (the caller's, Config.HTTPLock), and what each
// cost. The demo's main.go shows the redfence part; bench/ measures it.
package burst

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
	// HTTPLock puts httplock in front of origin for one replica, over rdb
	// (Redfence mode only), and returns what closes it.
	HTTPLock func(rdb redis.UniversalClient, origin http.Handler) (http.Handler, func(), error)
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

// serviceHost is the one name clients reach every replica under, as through
// a load balancer: httplock keys on the Host, so requests sent to each
// replica's own address would be four different sites, each with its own
// origin call.
const serviceHost = "stampede.example"

// Run fires cfg.Requests identical GETs at once over cfg.Replicas replicas
// protected by mode, and reports the origin calls and client latencies.
func Run(ctx context.Context, mode Mode, cfg Config) (Result, error) {
	if cfg.Replicas < 1 || cfg.Requests < 1 {
		return Result{}, errors.New("need at least one replica and one request")
	}
	if mode == Redfence && (cfg.NewClient == nil || cfg.HTTPLock == nil) {
		return Result{}, errors.New("redfence mode needs NewClient and HTTPLock")
	}
	var calls atomic.Int64
	origin := slowOrigin(&calls, cfg.OriginDelay)

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
		h, closeReplica, err := protect(mode, origin, cfg)
		if err != nil {
			return Result{}, err
		}
		closers = append(closers, closeReplica)
		url, stop, err := serve(h)
		if err != nil {
			return Result{}, err
		}
		closers = append(closers, stop)
		urls = append(urls, url+"/report?run="+runID)
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
	lat, failed := fire(ctx, client, urls, cfg)
	res := Result{Mode: mode, OriginCalls: calls.Load(), Errors: failed}
	slices.Sort(lat)
	res.P50 = lat[len(lat)*50/100]
	res.P99 = lat[min(len(lat)-1, len(lat)*99/100)]
	res.Max = lat[len(lat)-1]
	return res, nil
}

// protect puts mode's protection in front of origin, for one replica.
func protect(mode Mode, origin http.Handler, cfg Config) (http.Handler, func(), error) {
	switch mode {
	case None:
		return origin, func() {}, nil
	case Singleflight:
		return perReplicaSingleflight(origin), func() {}, nil
	case Redfence:
		rdb := cfg.NewClient()
		h, closeLocker, err := cfg.HTTPLock(rdb, origin)
		if err != nil {
			_ = rdb.Close()
			return nil, nil, err
		}
		return h, func() { closeLocker(); _ = rdb.Close() }, nil
	}
	return nil, nil, fmt.Errorf("unknown mode %q", mode)
}

// fire sends cfg.Requests GETs at once, spread over urls, and returns their
// latencies and how many failed.
func fire(ctx context.Context, client *http.Client, urls []string, cfg Config) ([]time.Duration, int) {
	lat := make([]time.Duration, cfg.Requests)
	var failed, done atomic.Int64
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range cfg.Requests {
		wg.Go(func() {
			<-start
			t0 := time.Now()
			if fetch(ctx, client, urls[i%len(urls)]) != nil {
				failed.Add(1)
			}
			lat[i] = time.Since(t0)
			n := done.Add(1)
			if cfg.Progress != nil {
				cfg.Progress(int(n), cfg.Requests)
			}
		})
	}
	close(start)
	wg.Wait()
	return lat, int(failed.Load())
}

// slowOrigin is the expensive handler the stampede is about.
func slowOrigin(calls *atomic.Int64, delay time.Duration) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		t := time.NewTimer(delay)
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
}

// serve runs h on a loopback port, as one replica.
func serve(h http.Handler) (url string, stop func(), err error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	var served sync.WaitGroup
	served.Go(func() { _ = srv.Serve(ln) })
	return "http://" + ln.Addr().String(), func() { _ = srv.Close(); served.Wait() }, nil
}

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
