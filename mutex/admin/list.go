package admin

import (
	"cmp"
	"context"
	"errors"
	"fmt"

	"github.com/redfence/redfence/mutex"
)

// maxCursorLen bounds a cursor: one List returns is far shorter.
const maxCursorLen = 512

// ListOptions bound one List call.
type ListOptions struct {
	// Match is a Redis glob (*, ?, [...], \ escapes) over keys as given to
	// Lock; "" matches all.
	Match string
	// Cursor continues a listing: the Cursor of the Page before; "" starts
	// one.
	Cursor string
	// Scans bounds the SCAN calls of this List call, 1 to 1000; default 10.
	Scans int
	// Count is SCAN's COUNT, the keys a SCAN call looks at, 1 to 100000;
	// default 1000.
	Count int
	// Free includes keys nobody holds that still keep their fencing
	// counter; by default a listing shows held and reserved keys only.
	Free bool
	// Limit ends a page's scanning once it found Limit lock keys: it reads
	// them, and all that its last SCAN returned, so that no key is passed
	// over; 0, the default, scans o.Scans times. A first screen of a large
	// listing then reads about what it shows.
	Limit int
}

// Page is one List call's part of a listing.
type Page struct {
	Locks []LockInfo // in the order they were found
	// Cursor continues the listing; "" once every server was scanned whole.
	Cursor string
	// RoundTrips is the number of round trips this call made, counting
	// calls to several servers at once as one.
	RoundTrips int
	// Skipped says why this page is partial: the Redlock nodes it could
	// not scan or read, and the keys too few nodes answered for. A
	// majority still answered (else List fails), but a lock held on a
	// skipped node may be missing from the page or shown free. Empty for
	// a whole page.
	Skipped []error
	// Semaphores and RWLocks are the semaphores with a permit held and the
	// read-write locks with a hold or a waiting writer that this call found
	// (with Free, all it found), in the order found. HoldsListed says
	// whether the backend lists them (backend.HoldLister, over a backend
	// that keeps them): when false they are empty, which says nothing.
	Semaphores  []SemaphoreInfo
	RWLocks     []RWLockInfo
	HoldsListed bool
}

// List scans the servers for lock keys that match o.Match and inspects
// them, and with them the semaphores and read-write locks of matching keys
// where the backend lists them (Page.HoldsListed): every master of a
// Cluster, every Redlock node, one shard after another. One call makes at most o.Scans SCAN round trips and one more to
// read the locks it found (on every Redlock node at once), so a listing of
// K keys costs about K/o.Count SCANs plus one read per call, whatever
// share of them are locks; pass Page.Cursor back for the next part. A
// failed call's Page has only its RoundTrips. SCAN's
// guarantees apply: a key present for the whole listing is found at least
// once; keys that come and go meanwhile may or may not be. A cursor names
// the server it continues on: after a failover or a resharding it is
// refused (ErrInvalid), and the listing starts again. Waiters are
// listed, forced releases are not (Inspect shows them). Reads are
// read-only scripts (EVALSHA_RO where the server has it), which a CLIENT
// PAUSE WRITE does not hold.
//
// Every Redlock call reads from every node, whether it found keys or not:
// when fewer than a quorum answer, it fails with an error matching
// mutex.ErrUnavailable, never an empty page; when a quorum answers but not all,
// the page is partial and Page.Skipped says why. An outside backend
// lists through backend.Inspector, one page of o.Count keys
// a round trip, its cursor the backend's; without one, List returns an
// error matching errors.ErrUnsupported.
func (a *Admin) List(ctx context.Context, o ListOptions) (Page, error) {
	o, err := a.checkList(ctx, o)
	if err != nil {
		return Page{}, err
	}
	if a.in == nil {
		return Page{}, errInspectUnsupported
	}
	return a.list(ctx, o)
}

// checkList refuses bad ListOptions and fills in the defaults.
func (a *Admin) checkList(ctx context.Context, o ListOptions) (ListOptions, error) {
	switch {
	case a == nil:
		return o, invalid("nil Admin")
	case ctx == nil:
		return o, invalid("nil context")
	case o.Scans < 0 || o.Scans > 1000:
		return o, invalid("Scans %d is outside 1..1000", o.Scans)
	case o.Count < 0 || o.Count > 100000:
		return o, invalid("Count %d is outside 1..100000", o.Count)
	case len(o.Match) > mutex.MaxKeyLen:
		return o, invalid("Match of %d bytes exceeds %d", len(o.Match), mutex.MaxKeyLen)
	case o.Limit < 0:
		return o, invalid("negative Limit %d", o.Limit)
	case len(o.Cursor) > maxCursorLen:
		return o, invalid("cursor of %d bytes is not one List returned", len(o.Cursor))
	}
	o.Scans = cmp.Or(o.Scans, 10)
	o.Count = cmp.Or(o.Count, 1000)
	o.Match = cmp.Or(o.Match, "*")
	return o, nil
}

// ListAll walks a whole listing (List, page after page) and returns every
// lock found (the semaphores and read-write locks are List's), or the
// first error. When a page was partial (Page.Skipped),
// it returns the locks found with an error matching ErrPartial that says
// why: a caller that stops at any error never takes a partial listing for a
// whole one.
func (a *Admin) ListAll(ctx context.Context, o ListOptions) ([]LockInfo, error) {
	var out []LockInfo
	var skipped []error
	for {
		page, err := a.List(ctx, o)
		if err != nil {
			return out, err
		}
		out = append(out, page.Locks...)
		skipped = append(skipped, page.Skipped...)
		if page.Cursor == "" {
			break
		}
		o.Cursor = page.Cursor
	}
	if len(skipped) > 0 {
		return out, fmt.Errorf("%w: %w", ErrPartial, errors.Join(skipped...))
	}
	return out, nil
}
