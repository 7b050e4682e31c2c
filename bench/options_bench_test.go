package bench

import (
	"context"
	"os"
	"runtime"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
)

// BenchmarkScriptOptionsPaired measures, end to end and paired, two
// options for the uncontended cycle's server work that issue 26 weighed
// against redislock, without the Locker (its Go work is BenchmarkPaired's
// redfence-vs-scripts):
//
//   - fcall: redfence's acquire and release scripts, unchanged, as a Redis
//     function library called with FCALL instead of EVALSHA;
//   - fcall-notime: the same with the acquire's TIME call replaced by a
//     counter in the library. Not a lock anyone may use: without the
//     server's clock the token can go backwards after a failover or a
//     restart that loses data (DESIGN.md). It shows what the clock costs.
//
// Pairs, sequential and parallel: fcall against the scripts by EVALSHA,
// fcall-notime against fcall, and the three against redislock.
func BenchmarkScriptOptionsPaired(b *testing.B) {
	s := startServers(b)
	ctx := context.Background()
	all := map[string]subject{}
	for _, sub := range uncontendedSubjects(b, s) {
		all[sub.name] = sub
	}
	one := s.client(b, s.one)
	if err := one.FunctionLoadReplace(ctx, optionsLibrary(b)).Err(); err != nil {
		b.Fatal(err)
	}
	all["scripts"] = scriptsSubject(b, one)
	all["fcall"] = fcallSubject(one, "fcall", "rf_acquire")
	all["fcall-notime"] = fcallSubject(one, "fcall-notime", "rf_acquire_notime")
	pairs := [][2]string{
		{"fcall", "scripts"}, {"fcall-notime", "fcall"},
		{"scripts", "redislock"}, {"fcall", "redislock"}, {"fcall-notime", "redislock"},
	}
	for _, mode := range []string{"seq", "parallel"} {
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

// optionsLibrary is the mutex package's acquire and release scripts as one
// function library; KEYS and ARGV become the functions' parameters.
func optionsLibrary(b *testing.B) string {
	acq, err := os.ReadFile("../mutex/lua/acquire.lua")
	if err != nil {
		b.Fatal(err)
	}
	rel, err := os.ReadFile("../mutex/lua/release.lua")
	if err != nil {
		b.Fatal(err)
	}
	// The counter starts at six digits and stays there for 900,000 cycles,
	// far more than a run makes: the fake microseconds stay well formed.
	notime := strings.Replace(string(acq), "local t = redis.call('TIME')",
		"ctr = ctr + 1\nlocal t = {'1800000000', tostring(ctr)}", 1)
	if notime == string(acq) {
		b.Fatal("acquire.lua no longer calls TIME as this benchmark expects")
	}
	return "#!lua name=rfoptions\nlocal ctr = 100000\n" +
		"local function acquire(KEYS, ARGV)\n" + string(acq) + "\nend\n" +
		"local function acquire_notime(KEYS, ARGV)\n" + notime + "\nend\n" +
		"local function release(KEYS, ARGV)\n" + string(rel) + "\nend\n" +
		"redis.register_function('rf_acquire', acquire)\n" +
		"redis.register_function('rf_acquire_notime', acquire_notime)\n" +
		"redis.register_function('rf_release', release)\n"
}

// fcallSubject is scriptsSubject through the function library: the same
// arguments, FCALL instead of EVALSHA.
func fcallSubject(c *redis.Client, name, acquireFn string) subject {
	return subject{name, func(ctx context.Context, key string) (func() error, error) {
		owner := token()
		keys := []string{"redfence:{" + key + "}", "redfence:{" + key + "}:q"}
		tok, err := c.FCall(ctx, acquireFn, keys[:1], owner, int64(10000)).Text()
		if err != nil {
			return nil, err
		}
		expect := tok + " 1 " + tok + "+10000 0 " + owner
		return func() error { return c.FCall(ctx, "rf_release", keys, expect, tok).Err() }, nil
	}}
}
