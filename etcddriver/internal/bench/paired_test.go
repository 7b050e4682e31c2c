package bench

import (
	"context"
	"os/exec"
	"runtime"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redfence/redfence/internal/benchkit"
	"github.com/redfence/redfence/internal/etcdtest"
)

// pairBlock is the cycles one side of a pair runs before the other's turn,
// as in bench's Paired: short enough that both sides see the same host.
const pairBlock = 16

// BenchmarkEtcdPaired measures the uncontended Lock+Release cycle of a
// subject and its reference in alternating blocks of pairBlock cycles (which
// side goes first alternating too), on one embedded etcd member, so that
// their ratio (x-ref) covers the same seconds. Named
// <mode>/<subject>-vs-<reference>; ns/op is the subject's time per cycle,
// ref-ns/op the reference's, rtt/op and ref-rtt/op their requests per cycle.
// Modes: seq, seq-busy (a niced busy loop keeps the CPUs awake), parallel
// (GOMAXPROCS goroutines on keys of their own).
//
// Subjects: redfence (a Locker over etcddriver), driver (etcddriver's Acquire
// and Release called directly, as the Locker calls them: redfence against it
// is the Locker's own cost), mutex (concurrency.Mutex on a long-lived
// session), floor (a put-if-absent transaction with the session's lease,
// then a delete: the least an etcd lock sends); mutex against itself shows
// the harness's bias.
func BenchmarkEtcdPaired(b *testing.B) {
	srv := etcdtest.Start(b)
	subs := map[string]subject{}
	for _, name := range []string{"redfence", "driver", "mutex", "mutex2", "floor"} {
		c := &rtt{}
		cli := client(b, srv, c)
		switch name {
		case "redfence":
			subs[name] = redfenceSubject(b, cli, c)
		case "driver":
			subs[name] = driverSubject(b, cli, c)
		case "floor":
			subs[name] = floorSubject(session(b, cli), c)
		default: // mutex2: the same, on a client of its own, against mutex
			subs[name] = mutexSubject(session(b, cli), c)
		}
	}
	pairs := [][2]string{
		{"redfence", "mutex"}, {"redfence", "floor"}, {"mutex", "floor"},
		{"redfence", "driver"}, {"driver", "mutex"}, {"mutex", "mutex2"},
	}
	ctx := context.Background()
	for _, mode := range []string{"seq", "seq-busy", "parallel"} {
		par := 1
		if mode == "parallel" {
			par = runtime.GOMAXPROCS(0)
		}
		for _, p := range pairs {
			sub, ref := subs[p[0]], subs[p[1]]
			b.Run(mode+"/"+p[0]+"-vs-"+p[1], func(b *testing.B) { runPair(ctx, b, sub, ref, mode, par) })
		}
	}
}

// runPair runs sub and ref in alternating blocks until each has run b.N
// cycles, and reports each side's time and requests per cycle, and the
// ratio of their times.
func runPair(ctx context.Context, b *testing.B, sub, ref subject, mode string, par int) {
	if mode == "seq-busy" {
		defer spin(b)()
	}
	// A block of each first: leases granted, watches and streams made.
	block(ctx, b, ref, "ref", mode, par)
	block(ctx, b, sub, "sub", mode, par)
	subN, refN := sub.rtt.n.Load(), ref.rtt.n.Load()
	b.ResetTimer()
	cycles := benchkit.Alternate(b, pairBlock*par,
		func() time.Duration { return block(ctx, b, sub, "sub", mode, par) },
		func() time.Duration { return block(ctx, b, ref, "ref", mode, par) })
	b.ReportMetric(float64(sub.rtt.n.Load()-subN)/float64(cycles), "rtt/op")
	b.ReportMetric(float64(ref.rtt.n.Load()-refN)/float64(cycles), "ref-rtt/op")
}

// block runs pairBlock cycles of sub on each of par goroutines (keys of
// their own; side keeps a subject's two sides apart) and returns the wall
// time they took together.
func block(ctx context.Context, b *testing.B, sub subject, side, mode string, par int) time.Duration {
	key := "pair-" + mode + "-" + side
	start := time.Now()
	if par == 1 {
		cycles(ctx, b, sub, key)
		return time.Since(start)
	}
	var wg sync.WaitGroup
	for i := range par {
		wg.Go(func() { cycles(ctx, b, sub, key+"-"+strconv.Itoa(i)) })
	}
	wg.Wait()
	return time.Since(start)
}

// cycles runs pairBlock Lock+Release cycles of sub on key.
func cycles(ctx context.Context, b *testing.B, sub subject, key string) {
	for range pairBlock {
		unlock, err := sub.lock(ctx, key)
		if err == nil {
			err = unlock()
		}
		if err != nil {
			b.Error(sub.name, err)
			return
		}
	}
}

// spin keeps a CPU busy with a niced busy loop in another process until the
// returned func is called: on an idle VM every round trip otherwise pays the
// wake-up of a sleeping CPU.
func spin(b *testing.B) func() {
	cmd := exec.Command("nice", "-n", "19", "sh", "-c", "while :; do :; done")
	if err := cmd.Start(); err != nil {
		b.Fatalf("spinner: %v", err)
	}
	return func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	}
}
