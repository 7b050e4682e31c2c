// Package bench compares redfence with the raw floor (SET NX PX, then a
// compare-and-delete EVALSHA) and with its peers, bsm/redislock and
// go-redsync/redsync, side by side, against private redis-servers started by
// internal/redistest (and PostgreSQL, from internal/testutil, for fenced). It is a module of its own so
// that peers never enter redfence's go.mod.
//
// Benchmarks: Uncontended (each subject on its own, sequential, with a busy
// CPU, and parallel, with allocs/op and the CPU time per cycle of the client
// and of the servers), Paired (a subject and its reference in
// alternating 16-cycle blocks, so that their ratio covers the same seconds of
// a noisy host), RedlockLatencyPaired (Redlock and redsync with each master
// behind a delaying proxy, healthy, with one paused and with one slow),
// Contended (one key, 2/8/32 goroutines through one Locker and four),
// Renewal, Fenced and Stampede. make bench runs them in
// interleaved rounds and bench/report prints medians and per-round ratios;
// make bench-server (bench/servercost) counts the Redis server's instructions
// per uncontended cycle under callgrind.
package bench
