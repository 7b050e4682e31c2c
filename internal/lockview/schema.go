package lockview

// SchemaDoc documents the JSON of both views: `redfence help json` prints
// it, and the lockdebug package doc points to it.
const SchemaDoc = `JSON schema 2, written by redfence --json and the lockdebug page (format=json).

Every document has "schema": 2; within a version fields are only ever added.
Times are RFC 3339 strings in UTC with microseconds, null when unknown.
Durations are numbers of milliseconds, to the microsecond, in fields ending
in _ms. Strings are the exact bytes where they are valid UTF-8; a key that
is not has key_hex, its bytes in hex (inspect and release take --key-hex).

lock (an element of a listing's locks; the head of an inspection):
  key          string   the key as given to Lock
  key_hex      string   the key's bytes in hex; present only when key is not valid UTF-8
  redis_key    string   the Redis key that holds it
  state        string   the lock's: "held", "reserved" (kept for the first waiter) or "free";
                        a semaphore or read-write lock of the same key is apart (inspection's
                        held_as, semaphore and rwlock; a listing's semaphores and rwlocks)
  token        int      the holder's fencing token; when free, the last one issued (0: none)
  owner        string   the holder's owner id ("" when free)
  owner_info   object   {service, host, pid, label} of the holder's Locker; null for a WithOwner id
                        that does not carry it (an election's does: admin.OwnerID)
  count        int      re-entries in Redis, plus one
  acquired_at  time     when the token was issued (server clock); null when unknown
  renewed_at   time     when the current lease began
  held_ms      number   server_time - acquired_at; null when unknown
  lease_ms     number   what is left of the lease
  waited       bool     a waiting Lock found it held
  waiters      array    {locker, owner_info, since, waited_ms}, longest waiting first
  no_queue     string   present when the store keeps no queue of waiting Lockers (Redlock,
                        etcd), saying so: waiters is then empty and says nothing
  server_time  time     when the server read it

listing (redfence locks --json; the page's "listing" has these fields too):
  schema       int      2
  complete     bool     false when servers were skipped or a limit cut the listing
  skipped      array    of strings: each server or key the listing could not read, and why
  truncated    bool     the listing stopped at --limit: more locks may match
  locks        array    of lock, by key
  semaphores   array    the semaphores with a permit held (all with --free), by key: {key,
                        key_hex, limit, holders}, as an inspection's semaphore. Absent over a
                        store whose listing shows none (etcd, Redlock): absence says nothing
  rwlocks      array    the read-write locks with a hold or a waiting writer (all with --free),
                        by key: {key, key_hex, writer, readers, writers_waiting,
                        last_write_token}, as an inspection's rwlock; absent as semaphores

inspection (redfence inspect --json): schema, the lock's fields, and
  held_as          array  of strings, what holds the key: "lock" (held or reserved),
                   "semaphore" (a permit), "rwlock" (a read or the write); [] when
                   nothing does
  forced_releases  array  {id, at, by, reason, token, floor, owner, owner_info, count}, latest first
  nodes            array  Redlock only: {node, addr, error, lock}, each node's view
  semaphore        object the semaphore of the key, when it has a limit or holders:
                   {limit, holders: [{owner, owner_info, lease_ms, token}]}, holders
                   by lease end. Absent otherwise, and always over a store that keeps
                   no semaphores (etcd, Redlock): its absence does not say there is none
  rwlock           object the read-write lock of the key, when it has a hold, a waiting
                   writer or a write's token: {writer (null when none), readers,
                   writers_waiting, last_write_token}, writer and readers as a
                   semaphore's holders (a reader's token is the last write's), readers
                   by lease end. Absent otherwise, and always over a store that keeps
                   no read-write locks (etcd, Redlock), as semaphore is

page (lockdebug, format=json):
  schema, time, host, pid, error (a bad parameter),
  lockers   array  {name, error, held_total, held: [{key, key_hex, token, acquired,
                   held_ms, lease_ms, ttl_ms, count, auto_renew, renewals,
                   last_renewal_ms, local_waiters, permit, rw}], campaigns: [{election,
                   value, term (0: campaigning), since}]}: the locks this process
                   holds, its semaphores' permits (permit true, key the
                   semaphore's name; absent for a lock), its read-write locks'
                   holds (rw "read" or "write", key the lock's name; absent
                   otherwise), and its candidates in the elections given with
                   the Locker
  listing   object (all=1) {locker, match, cursor, next_cursor ("" at the end),
                   round_trips, error, and the listing's fields}

fence (redfence fences --json, an array):
  resource     string
  token        int      the highest token recorded
  updated_at   time
`
