// Command redfence shows and operates the locks of package mutex: who holds
// what, since when, and who waits; a forced release that is safe; and the
// fences of package fenced.
//
//	redfence locks [PATTERN]       a table of the locks whose keys match PATTERN
//	redfence inspect KEY           everything about one key, in words
//	redfence watch [PATTERN]       the table, redrawn every --interval until Ctrl-C
//	redfence release KEY --force --reason TEXT [--token N] [--by NAME] [--fence RESOURCE]
//	redfence fences [PREFIX]       the highest token per resource (DATABASE_URL)
//	redfence help [COMMAND]
//
// Global flags, before or after the command: --redis URL (repeatable;
// default $REDIS_URL, else redis://127.0.0.1:6379), --prefix (the Lockers'
// mutex.WithPrefix, default "redfence:") and --timeout (the bound on each
// command, default 10s). A URL is redis:// or rediss:// for one server; with
// a master_name parameter its host is a Sentinel; with cluster=true, or addr
// parameters naming more nodes, a Cluster. Three or more --redis URLs are
// Redlock's independent masters. The command's Locker announces itself as
// service "redfence-cli".
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
// refused even before its renewal notices. Without --token, release reads
// the holder's token first and passes it, so that a holder who released
// meanwhile, and whoever took the key since, are left alone. The release is
// audited beside the key (by, reason, tokens, holder); inspect shows it.
//
// # JSON output
//
// locks --json prints an array of lock objects, inspect --json one lock
// object with forced_releases (and nodes, for Redlock), fences --json an
// array of fence objects. Fields are only ever added. Times are RFC 3339
// strings in UTC with microseconds, null when unknown; durations are
// integers of milliseconds.
//
//	lock:
//	  key          string   the key as given to Lock
//	  redis_key    string   the Redis key that holds it
//	  state        string   "held", "reserved" (kept for the first waiter) or "free"
//	  token        int      the holder's fencing token; when free, the last one issued (0: none)
//	  owner        string   the holder's owner id ("" when free)
//	  owner_info   object   {service, host, pid, label} of the holder's Locker; null for a WithOwner id
//	  count        int      re-entries in Redis, plus one
//	  acquired_at  time     when the token was issued (server clock)
//	  renewed_at   time     when the current lease began
//	  held_ms      int      server_time − acquired_at; null when unknown
//	  lease_ms     int      what is left of the lease
//	  waited       bool     a waiting Lock found it held
//	  waiters      array    {locker, owner_info, since, waited_ms}, longest waiting first
//	  server_time  time     when the server read it
//	  forced_releases array (inspect) {id, at, by, reason, token, floor, owner, owner_info, count}, latest first
//	  nodes        array    (inspect, Redlock) {node, addr, error, lock}: each node's view
//
//	fence:
//	  resource     string
//	  token        int      the highest token recorded
//	  updated_at   time
//
// # Exit status
//
// 0 when the command did what it was asked (watch: also when interrupted),
// 1 when it could not (the error on stderr says why, in words), 2 when it
// was asked wrongly and did nothing.
package main
