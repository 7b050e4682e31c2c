// Package chaos holds redfence's reliability suite (its tests): several
// clients, each with its own Locker and connections, repeatedly lock, do a
// read-modify-write of a PostgreSQL register through fenced (its table
// protected by fenced's trigger, so every write is checked twice), and
// unlock, while faults are injected at random: redis-server paused past the lease
// (SIGSTOP) and killed and restarted empty, latency and black-hole partitions
// between a client and Redis, clients stalling while they hold the lock, and
// for Redlock minority and majority node loss.
//
// Checkers: porcupine over the register history (it must be linearizable),
// the tokens the resource accepted (strictly increasing), and a count of the
// moments two clients believed they held the lock at once (expected above
// zero under stalls: the fence must reject every such late write).
//
// TestChaosMultiKey runs a multi-key workload over the single-node and
// Redlock setups: transfers between two of four accounts, both keys taken
// with LockAll in random order, both balances written in one transaction
// fenced on both (fenced.Guard.DoAll); its checks are porcupine over the
// accounts, tokens increasing per account, money conserved, and no
// deadlock.
//
// TestChaosElection runs an election workload over the
// single-node and Redlock setups: clients campaign on one election (half
// with Campaign and Release, half with Run) and, as leader, make fenced
// read-modify-writes of the register with their term; a stalling leader is
// cut off from Redis so that its renewals fail, as a paused process's
// would. Its checks (internal/leadercheck) are porcupine over the
// register, accepted terms never going down, terms strictly increasing,
// every write decided while its writer believed it led, and no two
// beliefs of leading overlapping beyond the drift margin except across a
// restart that lost the lock.
//
// TestChaosSemaphore runs a semaphore workload over the
// single-node and Sentinel setups: clients take permits of one semaphore of
// chaoskit.Permits, write to a PostgreSQL table while the permit is live,
// and release it. Its checks are porcupine over the permits against a
// model of a counting semaphore, no more live beliefs than permits except
// across a fault that lost the holders, and the writes within their
// permits.
//
// TestChaosRWLock runs a read-write lock workload over the
// single-node setup: clients mostly read the register under read holds,
// some write it through the fence with the write's token, some downgrade
// and read on. Besides the register's checks: every live read sees the
// live writes its token vouches for, and no read and write hold at once.
//
// TestChaosStores runs the single-node setup with the register in the other
// stores fenced supports: MySQL/MariaDB and SQLite (sqlfence) and Redis
// (redisfence).
//
// TestChaosPGLock runs the register workload with the lock itself on
// PostgreSQL (pgdriver, a throwaway server): killed client connections,
// server pauses past the lease and restarts, latency, partitions, stalls.
// TestChaosPGLockInTx puts the register in that server and has two clients
// write under the Locker and Check, two under LockTx and QueueLockTx, on
// one key; a write whose commit's reply was lost is settled (committed or
// not) by the register before the checks.
//
// The harness (the client loop, the fault loop, the PostgreSQL register, the
// checks and the failure artefacts) is internal/chaoskit, which the etcd
// module's suite (etcddriver/internal/chaos) shares; this package holds the Redis
// and PostgreSQL-lock setups.
//
// `make test` runs a bounded version; `make chaos` runs it for
// CHAOS_DURATION per setup (go test ./chaos -chaos.duration=10m).
package chaos
