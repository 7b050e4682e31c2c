// Package chaos is the etcd driver's reliability suite (its tests), on the
// harness of the root module's suite (internal/chaoskit: the same client
// loop, PostgreSQL register and checks). Four clients, each with its own
// etcd client and Locker over etcddriver, lock one key on a 3-member embedded
// cluster on loopback, do a fenced read-modify-write of a PostgreSQL
// register with the lock's token (a revision), and unlock, while faults are
// injected at random: the leader killed and restarted; a member paused (its
// client and peer traffic held, its raft sends dropped: etcdtest's
// Member.Pause, since a member in the test's process cannot be SIGSTOPped);
// a client cut off from the cluster (its connections black-holed by
// proxies); a client stalling past its lease while it believes it holds the
// lock.
//
// Checks: a linearizable register (porcupine), accepted tokens strictly
// increasing, no lost update, and, in long runs, stalls that show as
// overlaps or rejected writes.
//
// `make test` runs a bounded version; `make chaos` runs it for
// CHAOS_DURATION (go test ./internal/chaos -chaos.duration=10m from etcddriver/).
package chaos
