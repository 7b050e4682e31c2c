package bench

import (
	"cmp"
	"context"
	"math"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-redsync/redsync/v4"
	rsredis "github.com/go-redsync/redsync/v4/redis"
	rsgoredis "github.com/go-redsync/redsync/v4/redis/goredis/v9"
	"github.com/redis/go-redis/v9"

	"github.com/redfence/redfence/internal/redistest"
	"github.com/redfence/redfence/internal/testutil"
	"github.com/redfence/redfence/mutex"
	"github.com/redfence/redfence/redis/redlockdriver"
)

// The settings of BenchmarkRedlockLatencyPaired, the same for both
// libraries: what a deployment over masters a few milliseconds apart would
// set.
const (
	// latencyTTL is the lease: redfence's default TTL, and redsync's
	// expiry (WithExpiry; its default is 8s).
	latencyTTL = 10 * time.Second
	// latencyNodeTimeout bounds each master's reply to one call: the Redlock
	// description's 5–50 ms for a 10 s lease, about 6× the slowest healthy
	// round trip here. redfence: redlockdriver.WithStoreTimeout (default
	// TTL/20 = 500 ms). redsync: expiry × WithTimeoutFactor (default 0.05 =
	// 500 ms) for an acquisition; its Unlock has no bound of its own and gets
	// this one through its ctx, as does redfence's Release (which needs none).
	latencyNodeTimeout = 50 * time.Millisecond
	// latencyLockDeadline is the caller's deadline for one Lock; a Lock that
	// has not succeeded by then counts as failed.
	latencyLockDeadline = time.Second
	// slowDelay is the one-way delay of the master that goes slow.
	slowDelay = 50 * time.Millisecond
	// latencyMinCycles is the fewest cycles a side runs in a sub-benchmark,
	// whatever b.N, so that its p99 is not its maximum: with 500, the p99 is
	// the fifth-slowest cycle, where 200 made it the second-slowest, which
	// one hiccup of the host sets.
	latencyMinCycles = 500
	// latencyWarmup cycles a side runs unmeasured first (see warmUp).
	latencyWarmup = 4
)

// latencySetups are the masters' one-way delays, fastest first: a spread
// deployment of 5, and of 3.
var latencySetups = [][]time.Duration{
	{250 * time.Microsecond, 500 * time.Microsecond, time.Millisecond, 2 * time.Millisecond, 4 * time.Millisecond},
	{500 * time.Microsecond, time.Millisecond, 4 * time.Millisecond},
}

// BenchmarkRedlockLatencyPaired is Redlock where it is deployed: each
// master behind its own delaying proxy (testutil.TCPProxy's one-way delay,
// so a round trip to a master costs twice its delay), uncontended
// Lock+Unlock cycles of redfence's Redlock against redsync over the same
// masters, with redsync's defaults (it waits for every master) and with
// WithFailFast(true) (it returns at the quorum). The sides alternate cycle
// by cycle, and so does which goes first: with cycles of milliseconds,
// switching costs nothing.
//
// Scenarios, for 5 and for 3 masters, each fault set after the sides'
// warm-up (as to a deployment that was running) and kept for the whole run:
//
//	spread  every master at its delay
//	paused  the slowest master paused (SIGSTOP): the healthy quorum is
//	        untouched, so the lock should cost what it costs healthy
//	slow    the quorum's last master (1 ms) at 50 ms, beyond the node
//	        timeout: the quorum has to move to the next master, and the
//	        floor with it
//
// The settings (latencyTTL, latencyNodeTimeout, latencyLockDeadline and the
// clients') are the same for both libraries.
//
// Named <scenario>-<N>/<subject>-vs-<reference>. Per side: ns/op (the mean
// cycle), p50-ms and p99-ms, failed (Locks that did not succeed within
// latencyLockDeadline), node-calls/op (commands sent to the masters per
// cycle, the late ones included); the reference's with a ref- prefix; x-ref
// (subject ÷ reference, means). floor-ms is the physical floor of a
// quorum-return cycle: two sequential round trips to the quorum-th fastest
// master still answering, 2 × 2 × its one-way delay; x-floor is the
// subject's mean over it; ping-floor-ms the median of two sequential PINGs
// to that master through its proxy (what the harness adds to the floor). In
// the paused scenario, p99-x-healthy is the subject's p99 over its p99 in
// the spread scenario of the same run.
func BenchmarkRedlockLatencyPaired(b *testing.B) {
	healthy := map[string][]time.Duration{} // by sub-benchmark: the subject's cycles
	for _, delays := range latencySetups {
		n := strconv.Itoa(len(delays))
		m := startMasters(b, delays)
		quorum := len(delays)/2 + 1
		scenarios := []struct {
			name  string
			apply func(b *testing.B) // the fault, undone at b's Cleanup
		}{
			{"spread", func(*testing.B) {}},
			{"paused", func(b *testing.B) { m.pause(b, len(delays)-1) }},
			{"slow", func(b *testing.B) { m.setDelay(b, quorum-1, slowDelay) }},
		}
		for _, sc := range scenarios {
			for _, failFast := range []bool{false, true} {
				refName := "redsync-" + n
				if failFast {
					refName += "-failfast"
				}
				name := sc.name + "-" + n + "/redlock-" + n + "-vs-" + refName
				b.Run(name, func(b *testing.B) {
					ctx := context.Background()
					pair := latencyPair{sub: redlockLatencySide(b, "redlock-"+n, m), ref: redsyncLatencySide(b, refName, m, failFast)}
					pair.sub.warmUp(ctx, b)
					pair.ref.warmUp(ctx, b)
					// After the sides, so that its Cleanup (resuming a
					// paused master) runs before theirs (Close).
					sc.apply(b)
					floorMaster := m.floorMaster(quorum)
					pair.floor = 4 * m.delays[floorMaster]
					pair.run(ctx, b, max(b.N, latencyMinCycles), m.probe(b, floorMaster))
					pair.report(b)
					switch sc.name {
					case "spread":
						healthy[name] = pair.sub.cycles
					case "paused":
						var base []time.Duration
						for k, v := range healthy {
							if strings.HasPrefix(k, "spread-"+n+"/") {
								base = append(base, v...)
							}
						}
						if len(base) > 0 {
							b.ReportMetric(float64(percentile(pair.sub.cycles, 0.99))/float64(percentile(base, 0.99)), "p99-x-healthy")
						}
					}
				})
			}
		}
	}
}

// latencyPair is a subject and its reference, measured in alternation.
type latencyPair struct {
	sub, ref *latencySide
	floor    time.Duration   // two round trips to the master that completes a quorum
	pings    []time.Duration // two PINGs to that master, through its proxy
}

// run alternates cycles of the two sides, n each, and which goes first;
// every fourth pair of cycles, it also times probe.
func (p *latencyPair) run(ctx context.Context, b *testing.B, n int, probe func(context.Context, *testing.B) time.Duration) {
	p.sub.calls.n.Store(0)
	p.ref.calls.n.Store(0)
	b.ResetTimer()
	for i := range n {
		first, second := p.ref, p.sub
		if i%2 == 1 {
			first, second = p.sub, p.ref
		}
		first.cycle(ctx, b)
		second.cycle(ctx, b)
		if i%4 == 0 {
			p.pings = append(p.pings, probe(ctx, b))
		}
	}
	b.StopTimer()
}

func (p *latencyPair) report(b *testing.B) {
	sub, ref := p.sub.report(b, ""), p.ref.report(b, "ref-")
	b.ReportMetric(float64(sub)/float64(ref), "x-ref")
	b.ReportMetric(ms(p.floor), "floor-ms")
	b.ReportMetric(float64(sub)/float64(p.floor), "x-floor")
	b.ReportMetric(ms(percentile(p.pings, 0.5)), "ping-floor-ms")
}

// masters are the Redis masters of one setup, each behind its own proxy,
// with each one's one-way delay as set now and whether it is paused.
type masters struct {
	servers []*redistest.RedisServer
	proxies []*testutil.TCPProxy
	delays  []time.Duration
	paused  []bool
}

func startMasters(b *testing.B, delays []time.Duration) *masters {
	m := &masters{delays: slices.Clone(delays), paused: make([]bool, len(delays))}
	for _, d := range delays {
		srv := redistest.StartRedis(b)
		p := testutil.Proxy(b, srv.Addr())
		p.SetLatency(d)
		m.servers = append(m.servers, srv)
		m.proxies = append(m.proxies, p)
	}
	return m
}

// pause stops master i (SIGSTOP) until b's Cleanup.
func (m *masters) pause(b *testing.B, i int) {
	m.servers[i].Pause()
	m.paused[i] = true
	b.Cleanup(func() {
		m.servers[i].Resume()
		m.paused[i] = false
	})
}

// setDelay sets master i's one-way delay to d until b's Cleanup.
func (m *masters) setDelay(b *testing.B, i int, d time.Duration) {
	was := m.delays[i]
	m.proxies[i].SetLatency(d)
	m.delays[i] = d
	b.Cleanup(func() {
		m.proxies[i].SetLatency(was)
		m.delays[i] = was
	})
}

// floorMaster is the quorum-th fastest of the masters that answer: the one
// whose reply completes a quorum.
func (m *masters) floorMaster(quorum int) int {
	var up []int
	for i := range m.servers {
		if !m.paused[i] {
			up = append(up, i)
		}
	}
	slices.SortStableFunc(up, func(a, b int) int { return cmp.Compare(m.delays[a], m.delays[b]) })
	return up[quorum-1]
}

// clients are new clients of every master, through the proxies, with
// hooks: go-redis's defaults but for the pool (as in the other benchmarks)
// and ContextTimeoutEnabled, without which a ctx deadline does not bound a
// read and redsync's node timeout bounds nothing: with a master paused,
// each of its Lock and Unlock calls then waits for go-redis's ReadTimeout
// (5 s in v9.23; redfence returns at the quorum either way).
func (m *masters) clients(b *testing.B, hooks ...redis.Hook) []redis.UniversalClient {
	out := make([]redis.UniversalClient, len(m.proxies))
	for i, p := range m.proxies {
		c := redis.NewClient(&redis.Options{Addr: p.Addr(), PoolSize: 64, ContextTimeoutEnabled: true})
		for _, h := range hooks {
			c.AddHook(h)
		}
		b.Cleanup(func() { _ = c.Close() })
		out[i] = c
	}
	return out
}

// probe returns a function that times two sequential PINGs to master i.
func (m *masters) probe(b *testing.B, i int) func(context.Context, *testing.B) time.Duration {
	c := redis.NewClient(&redis.Options{Addr: m.proxies[i].Addr(), ContextTimeoutEnabled: true})
	b.Cleanup(func() { _ = c.Close() })
	return func(ctx context.Context, b *testing.B) time.Duration {
		start := time.Now()
		for range 2 {
			if err := c.Ping(ctx).Err(); err != nil {
				b.Fatalf("ping master %d: %v", i, err)
			}
		}
		return time.Since(start)
	}
}

// latencySide is one library in a pair, with its measurements.
type latencySide struct {
	name   string
	lock   func(ctx context.Context, key string) (unlock func(context.Context) error, err error)
	key    string
	calls  *counter
	cycles []time.Duration // of the measured cycles that acquired
	failed int
}

func redlockLatencySide(b *testing.B, name string, m *masters, hooks ...redis.Hook) *latencySide {
	s := &latencySide{name: name, calls: &counter{}}
	l := newRedlock(b, m.clients(b, append(hooks, s.calls)...), redlockdriver.WithStoreTimeout(latencyNodeTimeout))
	b.Cleanup(func() { _ = l.Close() })
	s.key = "latency-" + b.Name() + "-" + name
	s.lock = func(ctx context.Context, key string) (func(context.Context) error, error) {
		lk, err := l.Lock(ctx, key, mutex.WithTTL(latencyTTL))
		if err != nil {
			return nil, err
		}
		return lk.Release, nil
	}
	return s
}

func redsyncLatencySide(b *testing.B, name string, m *masters, failFast bool) *latencySide {
	s := &latencySide{name: name, calls: &counter{}}
	clients := m.clients(b, s.calls)
	pools := make([]rsredis.Pool, len(clients))
	for i, c := range clients {
		pools[i] = rsgoredis.NewPool(c)
	}
	rs := redsync.New(pools...)
	opts := []redsync.Option{
		redsync.WithExpiry(latencyTTL),
		redsync.WithTimeoutFactor(float64(latencyNodeTimeout) / float64(latencyTTL)),
		redsync.WithFailFast(failFast),
	}
	s.key = "latency-" + b.Name() + "-" + name
	s.lock = func(ctx context.Context, key string) (func(context.Context) error, error) {
		mu := rs.NewMutex(key, opts...)
		if err := mu.LockContext(ctx); err != nil {
			return nil, err
		}
		return func(ctx context.Context) error { _, err := mu.UnlockContext(ctx); return err }, nil
	}
	return s
}

// warmUp runs latencyWarmup cycles unmeasured, on a ctx that never ends,
// then waits out the calls to the slower masters: every master that answers
// has its connections open and the scripts loaded, as in a deployment that
// has run for a while. (A measured cycle ends its Lock's ctx once Lock
// returns, as a caller's deferred cancel would; a call still out to a slower
// master then cannot make the second try that loads a script after
// NOSCRIPT, so on fresh masters the slower ones would never run one.)
func (s *latencySide) warmUp(ctx context.Context, b *testing.B) {
	for range latencyWarmup {
		unlock, err := s.lock(ctx, s.key)
		if err != nil {
			b.Fatalf("%s: warm-up: %v", s.name, err)
		}
		if err := unlock(ctx); err != nil {
			b.Fatalf("%s: warm-up unlock: %v", s.name, err)
		}
	}
	time.Sleep(2 * latencyNodeTimeout)
}

// cycle is one Lock+Unlock, the Lock under the caller's deadline and the
// Unlock bounded by the node timeout. A failed Lock is counted; a failed
// Unlock ends the benchmark.
func (s *latencySide) cycle(ctx context.Context, b *testing.B) {
	start := time.Now()
	lctx, cancel := context.WithTimeout(ctx, latencyLockDeadline)
	unlock, err := s.lock(lctx, s.key)
	cancel()
	if err != nil {
		s.failed++
		return
	}
	uctx, cancel := context.WithTimeout(ctx, latencyNodeTimeout)
	err = unlock(uctx)
	cancel()
	if err != nil {
		b.Fatalf("%s: unlock: %v", s.name, err)
	}
	s.cycles = append(s.cycles, time.Since(start))
}

// report adds the side's metrics, named with prefix, and returns its mean
// cycle.
func (s *latencySide) report(b *testing.B, prefix string) time.Duration {
	n := len(s.cycles)
	if n == 0 {
		b.Fatalf("%s: no cycle acquired (%d failed)", s.name, s.failed)
	}
	mean := sum(s.cycles) / time.Duration(n)
	b.ReportMetric(float64(mean), prefix+"ns/op")
	b.ReportMetric(ms(percentile(s.cycles, 0.5)), prefix+"p50-ms")
	b.ReportMetric(ms(percentile(s.cycles, 0.99)), prefix+"p99-ms")
	b.ReportMetric(float64(s.failed), prefix+"failed")
	b.ReportMetric(float64(s.calls.n.Load())/float64(n+s.failed), prefix+"node-calls/op")
	return mean
}

// percentile is the nearest-rank p-quantile of d.
func percentile(d []time.Duration, p float64) time.Duration {
	s := slices.Sorted(slices.Values(d))
	return s[max(0, int(math.Ceil(p*float64(len(s))))-1)]
}

func sum(d []time.Duration) time.Duration {
	var t time.Duration
	for _, x := range d {
		t += x
	}
	return t
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
