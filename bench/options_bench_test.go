package bench

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
)

// BenchmarkScriptOptionsPaired measures, end to end and paired, what each
// part of redfence's scripts costs against redislock, without the Locker
// (its Go work is BenchmarkPaired's redfence-vs-scripts). The variants of
// the scripts subject:
//
//   - fcall: the acquire and release scripts, unchanged, as a Redis
//     function library called with FCALL instead of EVALSHA;
//   - fcall-notime: the same with the acquire's TIME call replaced by a
//     counter in the library. Not a lock anyone may use: without the
//     server's clock the token can go backwards after a failover or a
//     restart that loses data (DESIGN.md). It shows what the clock costs;
//   - no-queue: the release without the fair queue's key;
//   - short-owner: owner ids of 8 characters instead of 32;
//   - bare: all four at once, the least these scripts could cost.
//
// Each is paired with the scripts as they are, and the scripts and bare
// with redislock.
func BenchmarkScriptOptionsPaired(b *testing.B) {
	ctx := context.Background()
	s, all := subjectsByName(b)
	one := s.client(b, s.one)
	if err := one.FunctionLoadReplace(ctx, optionsLibrary(b)).Err(); err != nil {
		b.Fatal(err)
	}
	all["scripts"] = scriptsSubject(b, one)
	for _, v := range []scriptVariant{
		{name: "fcall", acquireFn: "rf_acquire", ownerLen: 32},
		{name: "fcall-notime", acquireFn: "rf_acquire_notime", ownerLen: 32},
		{name: "no-queue", noQueue: true, ownerLen: 32},
		{name: "short-owner", ownerLen: 8},
		{name: "bare", acquireFn: "rf_acquire_notime", noQueue: true, ownerLen: 8},
	} {
		all[v.name] = variantSubject(b, one, v)
	}
	pairs := [][2]string{
		{"fcall", "scripts"}, {"fcall-notime", "fcall"}, {"no-queue", "scripts"}, {"short-owner", "scripts"},
		{"scripts", "redislock"}, {"bare", "redislock"},
	}
	runPairs(ctx, b, all, pairs, "seq", "parallel")
}

// optionsLibrary is the mutex package's acquire and release scripts as one
// function library; KEYS and ARGV become the functions' parameters.
func optionsLibrary(b *testing.B) string {
	acq, rel := readScript(b, "acquire"), readScript(b, "release")
	// The counter starts at six digits and stays there for 900,000 cycles,
	// far more than a run makes: the fake microseconds stay well formed.
	notime := strings.Replace(acq, "local t = redis.call('TIME')",
		"ctr = ctr + 1\nlocal t = {'1800000000', tostring(ctr)}", 1)
	if notime == acq {
		b.Fatal("acquire.lua no longer calls TIME as this benchmark expects")
	}
	return "#!lua name=rfoptions\nlocal ctr = 100000\n" +
		"local function acquire(KEYS, ARGV)\n" + acq + "\nend\n" +
		"local function acquire_notime(KEYS, ARGV)\n" + notime + "\nend\n" +
		"local function release(KEYS, ARGV)\n" + rel + "\nend\n" +
		"redis.register_function('rf_acquire', acquire)\n" +
		"redis.register_function('rf_acquire_notime', acquire_notime)\n" +
		"redis.register_function('rf_release', release)\n"
}

func readScript(b *testing.B, name string) string {
	src, err := os.ReadFile("../redis/internal/redisproto/lua/" + name + ".lua")
	if err != nil {
		b.Fatal(err)
	}
	return string(src)
}

// scriptVariant is one way of running the scripts: as functions (acquireFn
// names the acquire function; "": by EVALSHA), with the release's queue
// key or not, with owner ids of ownerLen characters.
type scriptVariant struct {
	name      string
	acquireFn string
	noQueue   bool
	ownerLen  int
}

// variantSubject runs redfence's acquire and release scripts (read from
// the mutex package's source) directly, as v says, with the arguments an
// uncontended Lock and Unlock send, and nothing else: the server-side part
// of redfence's cycle, with go-redis's cost but none of the Locker's.
func variantSubject(b *testing.B, c *redis.Client, v scriptVariant) subject {
	acquire, release := redis.NewScript(readScript(b, "acquire")), redis.NewScript(readScript(b, "release"))
	return subject{v.name, func(ctx context.Context, key string) (func() error, error) {
		owner := token()[:v.ownerLen]
		keys := []string{"redfence:{" + key + "}", "redfence:{" + key + "}:q"}
		relKeys := keys
		if v.noQueue {
			relKeys = keys[:1]
		}
		var tok string
		var err error
		if v.acquireFn != "" {
			tok, err = c.FCall(ctx, v.acquireFn, keys[:1], owner, int64(10000)).Text()
		} else {
			tok, err = acquire.Run(ctx, c, keys[:1], owner, int64(10000)).Text()
		}
		if err != nil {
			return nil, err // a number (held) or a table (re-entered): not a fresh acquisition (see acquire.lua)
		}
		// The expected value release.lua compares whole: what acquire.lua
		// wrote, as the Locker builds it.
		expect := tok + " 1 " + tok + "+10000 0 " + owner
		if v.acquireFn != "" {
			return func() error { return c.FCall(ctx, "rf_release", relKeys, expect, tok).Err() }, nil
		}
		return func() error { return release.Run(ctx, c, relKeys, expect, tok).Err() }, nil
	}}
}
