// Command servercost measures what one uncontended Lock+Unlock costs the
// Redis server, in instructions, for the floor, redfence and its peers.
//
// Wall-clock benchmarks on a small VM move with the host from run to run;
// instruction counts do not. Each subject runs against its own redis-server
// under valgrind's callgrind, twice (n1 and n2 cycles), so that start-up and
// shutdown cancel out: instructions per cycle = (Ir(n2) - Ir(n1)) / (n2 - n1).
// Only the server's user-space instructions are counted (not the kernel's
// network stack, which every subject pays alike). Clients connect over a
// Unix socket.
//
//	cd bench && go run ./servercost          (or: make bench-server)
//
// Needs redis-server and valgrind (Debian: apt-get install redis-server
// valgrind).
package main

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/bsm/redislock"
	"github.com/go-redsync/redsync/v4"
	rsgoredis "github.com/go-redsync/redsync/v4/redis/goredis/v9"
	"github.com/redis/go-redis/v9"

	"github.com/redfence/redfence/mutex"
	"github.com/redfence/redfence/redis/redisdriver"
)

// cycle takes and releases one lock; close ends the subject.
type subject struct {
	name string
	make func(c *redis.Client) (cycle func(ctx context.Context) error, close func())
}

var floorRelease = redis.NewScript(`if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0`)

var subjects = []subject{
	{"floor", func(c *redis.Client) (func(context.Context) error, func()) {
		return func(ctx context.Context) error {
			var b [16]byte
			_, _ = rand.Read(b[:])
			tok := hex.EncodeToString(b[:])
			ok, err := c.SetNX(ctx, "k", tok, 10*time.Second).Result()
			if err != nil || !ok {
				return fmt.Errorf("SET NX: %v %w", ok, err)
			}
			return floorRelease.Run(ctx, c, []string{"k"}, tok).Err()
		}, func() {}
	}},
	{"redfence", func(c *redis.Client) (func(context.Context) error, func()) {
		l, err := newLocker(c)
		if err != nil {
			return func(context.Context) error { return err }, func() {}
		}
		return func(ctx context.Context) error {
			lk, err := l.Lock(ctx, "k")
			if err != nil {
				return err
			}
			return lk.Release(ctx)
		}, func() { _ = l.Close() }
	}},
	{"redislock", func(c *redis.Client) (func(context.Context) error, func()) {
		rl := redislock.New(c)
		return func(ctx context.Context) error {
			lk, err := rl.Obtain(ctx, "k", 10*time.Second, nil)
			if err != nil {
				return err
			}
			return lk.Release(ctx)
		}, func() {}
	}},
	{"redsync", func(c *redis.Client) (func(context.Context) error, func()) {
		rs := redsync.New(rsgoredis.NewPool(c))
		return func(ctx context.Context) error {
			m := rs.NewMutex("k", redsync.WithExpiry(10*time.Second))
			if err := m.LockContext(ctx); err != nil {
				return err
			}
			_, err := m.UnlockContext(ctx)
			return err
		}, func() {}
	}},
}

// newLocker is redfence over c: a redisdriver, and the Locker that owns it.
func newLocker(c *redis.Client) (*mutex.Locker, error) {
	d, err := redisdriver.New(c)
	if err != nil {
		return nil, err
	}
	l, err := mutex.New(d)
	if err != nil {
		_ = d.Close()
		return nil, err
	}
	return l, nil
}

// quiet drops go-redis's log lines (its dial retries while valgrind starts
// the server).
type quiet struct{}

func (quiet) Printf(context.Context, string, ...any) {}

func main() {
	redis.SetLogger(quiet{})
	n1 := flag.Int("n1", 500, "cycles of the first run")
	n2 := flag.Int("n2", 2500, "cycles of the second run")
	flag.Parse()
	for _, bin := range []string{"redis-server", "valgrind"} {
		if _, err := exec.LookPath(bin); err != nil {
			fmt.Fprintf(os.Stderr, "servercost: %s not found; install it (Debian: apt-get install redis-server valgrind)\n", bin)
			os.Exit(1)
		}
	}
	fmt.Printf("Redis server instructions per uncontended Lock+Unlock (callgrind, %d vs %d cycles)\n\n", *n1, *n2)
	var floor float64
	for _, s := range subjects {
		a, err := measure(s, *n1)
		if err == nil {
			var b uint64
			b, err = measure(s, *n2)
			if err == nil {
				per := float64(b-a) / float64(*n2-*n1)
				if s.name == "floor" {
					floor = per
				}
				fmt.Printf("%-10s %8.0f Ir/cycle  %5.2f × floor\n", s.name, per, per/floor)
				continue
			}
		}
		fmt.Fprintf(os.Stderr, "servercost: %s: %v\n", s.name, err)
		os.Exit(1)
	}
}

// measure runs n cycles of s against a fresh redis-server under callgrind
// and returns the server's total instruction count.
func measure(s subject, n int) (uint64, error) {
	dir, err := os.MkdirTemp("", "servercost")
	if err != nil {
		return 0, err
	}
	defer os.RemoveAll(dir)
	// A Unix socket: no port to find, and the same transport for everyone.
	sock := filepath.Join(dir, "redis.sock")
	out := filepath.Join(dir, "callgrind.out")
	cmd := exec.Command("valgrind", "--tool=callgrind", "--callgrind-out-file="+out,
		"redis-server", "--port", "0", "--unixsocket", sock, "--save", "", "--appendonly", "no", "--dir", dir)
	if err := cmd.Start(); err != nil {
		return 0, err
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	ctx := context.Background()
	c := redis.NewClient(&redis.Options{Network: "unix", Addr: sock})
	defer c.Close()
	deadline := time.Now().Add(30 * time.Second)
	for c.Ping(ctx).Err() != nil {
		if time.Now().After(deadline) {
			return 0, errors.New("redis-server under valgrind did not answer within 30s")
		}
		time.Sleep(100 * time.Millisecond)
	}
	cycle, closeSubject := s.make(c)
	for range n {
		if err := cycle(ctx); err != nil {
			closeSubject()
			return 0, err
		}
	}
	closeSubject()
	_ = c.ShutdownNoSave(ctx).Err() // the connection drops as the server exits
	if err := cmd.Wait(); err != nil {
		var exit *exec.ExitError
		if !errors.As(err, &exit) {
			return 0, err
		}
	}
	return totalIr(out)
}

// totalIr reads the event total from a callgrind output file.
func totalIr(path string) (uint64, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		for _, prefix := range []string{"summary:", "totals:"} {
			if v, ok := strings.CutPrefix(line, prefix); ok {
				return strconv.ParseUint(strings.Fields(v)[0], 10, 64)
			}
		}
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	return 0, fmt.Errorf("no totals in %s", path)
}
