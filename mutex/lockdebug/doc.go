// Package lockdebug serves a debug page of redfence locks, mountable like
// net/http/pprof: the locks this process holds, and on request the
// cluster-wide listing.
//
//	mux := http.NewServeMux() // the internal/admin mux, as for pprof
//	mux.Handle("/debug/locks/", lockdebug.Handler(locker))
//
// # Security
//
// The page shows lock keys, tokens and the hosts, pids and services of
// their owners. Mount it on an internal or admin listener only, as you
// would net/http/pprof, never on a public mux; it has no authentication of
// its own. Everything that comes from a key, an owner id or a request is
// escaped (html/template), with control and bidirectional characters and
// bytes that are not UTF-8 shown as Go escapes ("rtl\u202eevil"); a bad
// parameter's value is repeated in an error only up to 64 bytes, and an
// oversize match or cursor is dropped from the page. Responses carry
// Cache-Control: no-store,
// X-Content-Type-Options: nosniff and a Content-Security-Policy that allows
// no script (the page has none).
//
// # What it shows
//
// For each Locker, the locks it holds (admin.Admin.Held, no round trip): key,
// fencing token, held for, lease left of its TTL, re-entries (count),
// auto-renewal, successful renewals and the round trip of the last one, and
// the goroutines of this process waiting for the key. At most 1000 locks
// per Locker are shown, by key; the total is stated. For the elections
// given with a Locker (Named.Elections), its section lists this process's
// candidates (election.Candidacies, no round trip): each term it leads,
// with the term and since when, and each campaign still waiting.
//
// With all=1, one admin.Admin.List call under the request's context (for at
// most 5 seconds) reads one page of the cluster-wide listing: key, state,
// token, owner (its OwnerInfo, or the raw owner id of a WithOwner lock),
// held for (the server's time since the token was issued), lease left,
// count, and the Lockers queued for the key with the longest wait, a
// page's locks sorted by key; then a row per permit of a semaphore and per
// hold of a read-write lock, with its holder's owner info. A page costs
// what one List call costs with its default bounds (10 SCANs of COUNT
// 1000, then a read of each kind found) and shows its round trips; the
// next-page link carries the cursor.
//
// # Parameters
//
//	format   html (default) or json; without it, JSON when Accept names
//	         application/json and not text/html
//	all      1: add the cluster-wide listing
//	match    a Redis glob over the keys as given to Lock ("orders:*")
//	cursor   the listing's next_cursor, to continue it
//	locker   which Locker lists, by name (default: the first)
//	scans    SCAN calls of this page, 1 to 10 (default 10): smaller pages
//	count    SCAN's COUNT, 1 to 1000 (default 1000): smaller pages
//
// # Status
//
//	200  the page
//	400  a bad parameter, or one List refused (a malformed cursor, a match
//	     longer than mutex.MaxKeyLen, a cursor over 512 bytes): the page says
//	     which, in words
//	405  a method other than GET and HEAD (with Allow: GET, HEAD)
//	500  the listing was asked of a nil Locker
//	501  the Locker's backend offers no listing (a backend without
//	     backend.Inspector)
//	502  List failed: Redis did not answer or refused, or fewer than a
//	     quorum of Redlock nodes answered. The page still shows this
//	     process's locks, and the error in words.
//
// # JSON
//
// The JSON form has the same content, in the schema the redfence command
// writes (`redfence help json` prints it, version 2 in every document's
// "schema"): times are RFC 3339 in UTC with microseconds, durations are
// milliseconds (to the microsecond) in fields ending in _ms, and a key that
// is not UTF-8 also comes as key_hex. The page is
//
//	{"schema": 2, "time": ..., "host": ..., "pid": ..., "error": ...,
//	 "lockers": [{"name": ..., "error": ..., "held_total": 2, "held": [
//	   {"key": ..., "token": ..., "acquired": ..., "held_ms": ..., "lease_ms": ...,
//	    "ttl_ms": ..., "count": ..., "auto_renew": ..., "renewals": ...,
//	    "last_renewal_ms": ..., "local_waiters": ...}]}],
//	 "listing": {"locker": ..., "match": ..., "cursor": ..., "next_cursor": ...,
//	   "round_trips": ..., "error": ..., "schema": 2, "complete": ...,
//	   "skipped": [...], "truncated": false, "locks": [lock, ...],
//	   "semaphores": [...], "rwlocks": [...]}}
//
// where a lock, a semaphore and a read-write lock have the fields of
// `redfence locks --json`'s. A listing that
// a quorum of Redlock nodes answered but not every node is shown with
// complete false, skipped saying which and why, and a banner in HTML; one
// that fewer answered is a 502, never an empty listing.
//
// next_cursor is "" at the end of the listing. The handler is safe for
// concurrent use, starts no goroutine of its own (List may run on the
// Locker's, for a client without ContextTimeoutEnabled), and never panics
// while serving.
package lockdebug
