package bench

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"os/exec"
	"regexp"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redfence/redfence/internal/benchkit"
)

// The raw floor's release: a compare-and-delete script.
var floorRelease = redis.NewScript(`if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0`)

func token() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// uncontendedSubjects builds every subject of the uncontended comparison.
func uncontendedSubjects(b *testing.B, s *servers) []subject {
	one := s.client(b, s.one)
	l3 := newRedlock(b, s.clients(b, 3))
	l5 := newRedlock(b, s.clients(b, 5))
	return []subject{
		floorSubject(one),
		redfenceSubject(b, "redfence", newLocker(b, one)),
		redislockSubject(one),
		redsyncSubject("redsync-1", one),
		redfenceSubject(b, "redlock-3", l3),
		redsyncSubject("redsync-3", s.clients(b, 3)...),
		redfenceSubject(b, "redlock-5", l5),
		redsyncSubject("redsync-5", s.clients(b, 5)...),
	}
}

func cycle(ctx context.Context, b *testing.B, sub subject, key string) {
	unlock, err := sub.lock(ctx, key)
	if err != nil {
		b.Fatal(err)
	}
	if err := unlock(); err != nil {
		b.Fatal(err)
	}
}

// spin keeps a CPU busy with a niced busy loop in another process until the
// returned func is called: on an idle VM every round trip otherwise pays the
// wake-up of a sleeping CPU, which hides the difference between subjects.
// Niced, it only soaks up cycles nobody else wants; outside Go, it takes no
// P from the goroutines measured.
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

// BenchmarkUncontended is one Lock+Unlock cycle with nobody else around, for
// every subject: sequential, sequential with a spinning process, and with
// GOMAXPROCS goroutines on distinct keys. Sequential and parallel also report
// the CPU time per cycle, the client's and the servers' (see cpuMeter).
func BenchmarkUncontended(b *testing.B) {
	s := startServers(b)
	ctx := context.Background()
	subjects := uncontendedSubjects(b, s)
	for _, sub := range subjects {
		b.Run("seq/"+sub.name, func(b *testing.B) {
			b.ReportAllocs()
			cpu := startCPU(b, s.all()...)
			for b.Loop() {
				cycle(ctx, b, sub, "seq-"+sub.name)
			}
			cpu.report(b)
		})
	}
	for _, sub := range subjects {
		b.Run("seq-busy/"+sub.name, func(b *testing.B) {
			stop := spin(b)
			for b.Loop() {
				cycle(ctx, b, sub, "busy-"+sub.name)
			}
			stop()
		})
	}
	var n atomic.Int64
	for _, sub := range subjects {
		b.Run("parallel/"+sub.name, func(b *testing.B) {
			b.ReportAllocs()
			cpu := startCPU(b, s.all()...)
			b.RunParallel(func(pb *testing.PB) {
				key := "par-" + sub.name + "-" + strconv.FormatInt(n.Add(1), 10)
				for pb.Next() {
					cycle(ctx, b, sub, key)
				}
			})
			cpu.report(b)
		})
	}
}

var statRe = regexp.MustCompile(`cmdstat_([a-z|]+):calls=(\d+)`)

// commandCalls is every command the server ran, script-internal calls
// included (Redis 7 counts those in commandstats too).
func commandCalls(ctx context.Context, c *redis.Client) int64 {
	info, _ := c.Info(ctx, "commandstats").Result()
	var n int64
	for _, m := range statRe.FindAllStringSubmatch(info, -1) {
		if m[1] == "info" || m[1] == "ping" {
			continue
		}
		v, _ := strconv.ParseInt(m[2], 10, 64)
		n += v
	}
	return n
}

// BenchmarkContended has G goroutines take one key in turn. redfence runs
// through one Locker and through 4 (each with its own client, as 4 processes
// would); redislock with a 1 ms linear retry; redsync with its defaults
// (which give up: counted). It reports the wait distribution, the busiest
// goroutine's share, round trips and Redis commands per acquisition, and
// acquisitions per second.
func BenchmarkContended(b *testing.B) {
	for _, g := range []int{2, 8, 32} {
		for _, name := range []string{"redfence-1", "redfence-4", "redislock", "redsync"} {
			b.Run("g="+strconv.Itoa(g)+"/"+name, func(b *testing.B) {
				s := startServers(b)
				ctx := context.Background()
				admin := s.one.Client()
				b.Cleanup(func() { _ = admin.Close() })
				var subs []subject
				switch name {
				case "redfence-1":
					subs = []subject{redfenceSubject(b, name, newLocker(b, s.client(b, s.one)))}
				case "redfence-4":
					for range 4 {
						subs = append(subs, redfenceSubject(b, name, newLocker(b, s.client(b, s.one))))
					}
				case "redislock":
					subs = []subject{redislockSubject(s.client(b, s.one))}
				case "redsync":
					subs = []subject{redsyncSubject(name, s.client(b, s.one))}
				}
				contend(ctx, b, g, subs, func() int64 { return commandCalls(ctx, admin) }, s.rtt)
			})
		}
	}
}

func contend(ctx context.Context, b *testing.B, g int, subs []subject, cmds func() int64, rtt *counter) {
	var (
		mu      sync.Mutex
		waits   []time.Duration
		per     = make([]int, g)
		left    atomic.Int64
		gaveUp  atomic.Int64
		failure atomic.Value
	)
	left.Store(int64(b.N))
	cmdsBefore, rttBefore := int64(0), rtt.n.Load()
	if cmds != nil {
		cmdsBefore = cmds()
	}
	b.ResetTimer()
	var wg sync.WaitGroup
	for i := range g {
		sub := subs[i%len(subs)]
		wg.Go(func() {
			var mine []time.Duration
			for left.Add(-1) >= 0 {
				start := time.Now()
				var unlock func() error
				for {
					var err error
					unlock, err = sub.lock(ctx, "hot")
					if err == nil {
						break
					}
					if !errors.Is(err, errGaveUp) {
						failure.Store(err)
						return
					}
					gaveUp.Add(1) // redsync ran out of retries: the caller tries again
				}
				mine = append(mine, time.Since(start))
				per[i]++
				_ = unlock()
			}
			mu.Lock()
			waits = append(waits, mine...)
			mu.Unlock()
		})
	}
	wg.Wait()
	b.StopTimer()
	if err, _ := failure.Load().(error); err != nil {
		b.Fatal(err)
	}
	n := len(waits)
	if n == 0 {
		return
	}
	if cmds != nil {
		b.ReportMetric(float64(cmds()-cmdsBefore)/float64(n), "cmds/acq")
	}
	trips := rtt.n.Load() - rttBefore
	b.ReportMetric(float64(gaveUp.Load())/float64(n), "give-ups/acq")
	benchkit.ReportWaits(b, waits, per, trips)
}
