package bench

import (
	"context"
	"runtime"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redfence/redfence/internal/benchkit"
)

// pairBlock is how many cycles one side of a pair runs before the other
// side's turn: short enough that both sides see the same host (a 2-vCPU VM's
// speed drifts by tens of per cent from one second to the next), long enough
// that switching sides costs nothing measurable.
const pairBlock = 16

// BenchmarkPaired measures a subject and its reference in alternating blocks
// of pairBlock cycles inside one benchmark, so that their ratio (x-ref) is
// taken over the same seconds. BenchmarkUncontended gives each subject a
// second of its own, and on the README's VM its per-round ratios spread from
// 0.95 to 1.55 while neither subject changed; the paired ratios of one
// subject stay within a few per cent of each other.
//
// Each is named <mode>/<subject>-vs-<reference>, which is all bench/report
// needs to print it. ns/op is the subject's time per cycle, ref-ns/op the
// reference's. In
// parallel mode each block runs on GOMAXPROCS goroutines (distinct keys) at
// once, and the two sides never overlap.
//
// Which side runs first alternates from block to block, so that neither
// inherits the other's warm caches or cold CPU every time.
//
// Pairs: redfence, redislock and redfence's two scripts called directly (no
// Locker: what the server-side work alone costs) against the floor;
// redfence against redislock, and against its scripts (what the Locker's
// own client work costs); the floor against itself (the harness's own bias,
// which should read 1.00×); and Redlock over 5 nodes against redsync over
// the same 5.
func BenchmarkPaired(b *testing.B) {
	ctx := context.Background()
	s, all := subjectsByName(b)
	all["scripts"] = scriptsSubject(b, s.client(b, s.one))
	pairs := [][2]string{
		{"redfence", "floor"}, {"scripts", "floor"}, {"redislock", "floor"},
		{"redfence", "redislock"}, {"redfence", "scripts"}, {"floor", "floor"},
		{"redlock-5", "redsync-5"},
	}
	runPairs(ctx, b, all, pairs, "seq", "seq-busy", "parallel")
}

// subjectsByName starts the run's servers and returns them with the
// uncontended subjects by name.
func subjectsByName(b *testing.B) (*servers, map[string]subject) {
	s := startServers(b)
	all := map[string]subject{}
	for _, sub := range uncontendedSubjects(b, s) {
		all[sub.name] = sub
	}
	return s, all
}

// runPairs runs each pair of subjects (from all, by name) in each mode, as
// <mode>/<subject>-vs-<reference>; parallel mode on GOMAXPROCS goroutines.
func runPairs(ctx context.Context, b *testing.B, all map[string]subject, pairs [][2]string, modes ...string) {
	for _, mode := range modes {
		par := 1
		if mode == "parallel" {
			par = runtime.GOMAXPROCS(0)
		}
		for _, p := range pairs {
			sub, ref := all[p[0]], all[p[1]]
			b.Run(mode+"/"+sub.name+"-vs-"+ref.name, func(b *testing.B) { runPair(ctx, b, sub, ref, mode, par) })
		}
	}
}

// runPair runs sub and ref in alternating blocks, which goes first
// alternating too, until each has run b.N cycles, and reports sub's ns/op,
// ref's ref-ns/op and their ratio x-ref.
func runPair(ctx context.Context, b *testing.B, sub, ref subject, mode string, par int) {
	if mode == "seq-busy" {
		defer spin(b)()
	}
	benchkit.Alternate(b, pairBlock*par,
		func() time.Duration { return block(ctx, b, sub, "sub", mode, par) },
		func() time.Duration { return block(ctx, b, ref, "ref", mode, par) })
}

// block runs pairBlock cycles of sub on each of par goroutines (distinct
// keys; side keeps the floor-vs-floor pair's two sides apart) and returns
// the wall time they took together.
func block(ctx context.Context, b *testing.B, sub subject, side, mode string, par int) time.Duration {
	start := time.Now()
	key := "pair-" + mode + "-" + side + "-" + sub.name
	if par == 1 {
		for range pairBlock {
			cycle(ctx, b, sub, key)
		}
		return time.Since(start)
	}
	var wg sync.WaitGroup
	for i := range par {
		key := key + "-" + strconv.Itoa(i)
		wg.Go(func() {
			for range pairBlock {
				cycle(ctx, b, sub, key)
			}
		})
	}
	wg.Wait()
	return time.Since(start)
}

// scriptsSubject is redfence's two scripts as they are, without a Locker
// (variantSubject).
func scriptsSubject(b *testing.B, c *redis.Client) subject {
	return variantSubject(b, c, scriptVariant{name: "scripts", ownerLen: 32})
}

// pairBlockOps is the operations a side runs per goroutine in one block of
// alternateBlocks.
const pairBlockOps = 20

// alternateBlocks runs ref and sub in alternating blocks of pairBlockOps
// operations on each of par goroutines (goroutine g works on resource
// prefix+g), which side goes first alternating too, until each side has
// run b.N operations, and reports sub's ns/op, ref's ref-ns/op and their
// ratio x-ref, after a block of each to warm up: the side-by-side measure
// of the fenced stores' benchmarks.
func alternateBlocks(b *testing.B, par int, prefix string, ref, sub func(res string) error) {
	run := func(w func(string) error) time.Duration {
		start := time.Now()
		var wg sync.WaitGroup
		for g := range par {
			res := prefix + strconv.Itoa(g)
			wg.Go(func() {
				for range pairBlockOps {
					if err := w(res); err != nil {
						b.Error(err)
						return
					}
				}
			})
		}
		wg.Wait()
		return time.Since(start)
	}
	run(ref) // warm up: dial the connections, create the rows or keys
	run(sub)
	var subT, refT time.Duration
	ops := 0
	for i := 0; ops < b.N && !b.Failed(); i++ {
		if i%2 == 0 {
			refT += run(ref)
			subT += run(sub)
		} else {
			subT += run(sub)
			refT += run(ref)
		}
		ops += pairBlockOps * par
	}
	b.ReportMetric(float64(subT.Nanoseconds())/float64(ops), "ns/op")
	b.ReportMetric(float64(refT.Nanoseconds())/float64(ops), "ref-ns/op")
	b.ReportMetric(float64(subT)/float64(refT), "x-ref")
}
