// Command redfence shows and operates the locks of package mutex: who holds
// what, since when, and who waits; a forced release that is safe; and the
// fences of package fenced.
//
//	redfence locks [PATTERN]       the locks, semaphores and read-write locks whose keys match PATTERN
//	redfence inspect KEY           everything about one key, in words, and its release line
//	redfence watch [PATTERN]       the table, redrawn every --interval until Ctrl-C
//	redfence release --token N --force --reason TEXT [--fence RESOURCE] -- KEY
//	redfence elections [PATTERN]   who leads each election (package election): value, term, since, host
//	redfence fences [PREFIX]       the highest token per resource (DATABASE_URL)
//	redfence help [COMMAND | json]
//
// Global flags, before or after the command: --redis URL (repeatable;
// default $REDIS_URL, else redis://127.0.0.1:6379), --prefix (the Lockers'
// driver's WithPrefix, default "redfence:") and --timeout (the bound on each
// call to the servers, each page of a listing, default 10s). A URL is
// redis:// or rediss:// for one server; with a master_name parameter its
// host is a Sentinel; with cluster=true, or addr parameters naming more
// nodes, a Cluster. Three or more --redis URLs are
// Redlock's independent masters. The command's Locker announces itself as
// service "redfence-cli".
//
// --postgres URL (with --postgres-schema, the Lockers' pgdriver.WithSchema)
// looks at pgdriver's lease table instead; the flag alone names it, never
// $DATABASE_URL. It refuses a standby and a schema without the table.
//
// --etcd URL (the members of one cluster; repeat it or separate URLs with
// commas; default $ETCD_ENDPOINTS) and --etcd-token-base (the Lockers'
// etcddriver.WithTokenBase) look at the locks of etcddriver Drivers.
// Before a command every member named is asked for its status: a learner,
// or a cluster without a leader, is refused.
//
// The command is its own module (go install
// github.com/redfence/redfence/cmd/redfence), so that a library user's
// build never compiles what the other stores need. Every store runs the
// same commands (cmd/internal/cli), over the Locker the store builds from
// the flags.
//
// # Forced release
//
// Only a lock's holder can release it; an operator's release is always a
// forced one, and release refuses to run without --force and a --reason.
// It is safe where other tools' are not: the key keeps a token floor above
// the holder's token, so the holder's next renewal fails and its lock's
// context ends with mutex.ErrLockLost (within a third of its lease when it
// renews automatically, else at its next Extend or lease deadline), and
// every later token exceeds the floor. With --fence RESOURCE and
// DATABASE_URL, the fence of RESOURCE is raised to the floor at once
// (fenced.Guard.Raise), so the old holder's writes through fenced are
// refused even before its renewal notices; without --fence, release says
// that the holder's fenced writes still pass until the fence is raised.
// Name the holder by the token inspect showed (inspect prints the whole
// line), so that a holder who released meanwhile, and whoever took the key
// since, are left alone. Without --token, release shows the holder there is
// now (owner, token, held for) and asks before ending that one, unless
// --yes. The release is audited beside the key (by, reason, tokens,
// holder); inspect shows it.
//
// # What it refuses to say
//
// It never reports "no locks" or "free" when it could not look: fewer than
// a quorum of Redlock nodes answering is an error; a listing that a quorum
// answered but not every node prints what it found, says it is partial, and
// exits 1. A plain URL to a Cluster node (which would show one master's
// keys) or to a replica (which shows a lock it has not synced as free) is
// refused, with the URL or address to give instead. An error after a
// timeout says how long it waited and which server; Ctrl-C returns at once.
// Keys, owners and reasons that hold control, invisible or non-UTF-8 bytes,
// or start with a double quote, print quoted as Go strings; inspect and
// release take such a key as --key-hex.
//
// # JSON output
//
// locks --json, inspect --json and fences --json print version 2 of the
// schema that the lockdebug page writes too; `redfence help json` prints it
// whole. Within a version, fields are only ever added.
//
// # Exit status
//
// 0 when the command did what it was asked (watch: also when interrupted),
// 1 when it could not, wholly (the error on stderr says why, in words; a
// partial listing is printed and exits 1), 2 when it was asked wrongly and
// did nothing.
package main
