package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/redfence/redfence/internal/lockview"
	"github.com/redfence/redfence/mutex"
	"github.com/redfence/redfence/mutex/admin"
)

func setupLocks(fs *flag.FlagSet) runFunc {
	asJSON := fs.Bool("json", false, "print JSON (redfence help json has its schema)")
	free := fs.Bool("free", false, "include free keys that still keep their last token")
	limit := fs.Int("limit", 0, "stop after `N` are found, locks, semaphores and read-write locks together (default: all)")
	return func(ctx context.Context, inv *invocation, args []string) error {
		if *limit < 0 {
			return usagef("locks", "--limit must be positive, got %d", *limit)
		}
		pattern := ""
		if len(args) == 1 {
			pattern = args[0]
		}
		if err := checkPattern(pattern); err != nil {
			return err
		}
		c, err := inv.connect(ctx)
		if err != nil {
			return err
		}
		defer c.Close()
		ls, err := listLocks(ctx, c, inv.g, listQuery{pattern: pattern, free: *free, limit: *limit})
		if err != nil {
			return err
		}
		if *asJSON {
			err = writeJSON(inv.stdout, ls.json(c.Traits().NoQueue))
		} else {
			err = writeLocks(inv.stdout, ls)
		}
		if err != nil {
			return err
		}
		return ls.incomplete()
	}
}

// checkPattern refuses, before anything is sent, a pattern List would.
func checkPattern(pattern string) error {
	if len(pattern) > mutex.MaxKeyLen {
		return usagef("", "PATTERN of %d bytes exceeds %d", len(pattern), mutex.MaxKeyLen)
	}
	return nil
}

// listQuery is what a listing looks for.
type listQuery struct {
	pattern string
	free    bool
	limit   int // 0: no limit
}

// listing is what a listing found: its locks, semaphores and read-write
// locks, each by key and once.
type listing struct {
	listQuery
	locks       []admin.LockInfo
	sems        []admin.SemaphoreInfo
	rws         []admin.RWLockInfo
	holdsListed bool    // the store lists semaphores and read-write locks (admin.Page.HoldsListed)
	skipped     []error // partial: what could not be read
	truncated   bool    // stopped at the limit: more may match
}

// found is how many locks, semaphores and read-write locks ls holds.
func (ls listing) found() int { return len(ls.locks) + len(ls.sems) + len(ls.rws) }

// listLocks reads the locks, semaphores and read-write locks whose keys
// match q.pattern, page after page, each page under its own --timeout,
// until the listing ends or q.limit of them were found.
func listLocks(ctx context.Context, c *session, g globals, q listQuery) (listing, error) {
	ls := listing{listQuery: q}
	o := admin.ListOptions{Match: q.pattern, Free: q.free}
	if q.limit > 0 {
		// Read about what is shown: a page stops once it found the rest,
		// and each SCAN returns about as many keys.
		o.Limit, o.Count = q.limit, min(max(q.limit, 10), 1000)
	}
	for {
		var page admin.Page
		elapsed, err := timed(ctx, g.timeout, func(ctx context.Context) (err error) {
			page, err = c.admin.List(ctx, o)
			return err
		})
		if err != nil {
			return ls, explain(c, err, elapsed)
		}
		ls.locks = append(ls.locks, page.Locks...)
		ls.sems = append(ls.sems, page.Semaphores...)
		ls.rws = append(ls.rws, page.RWLocks...)
		ls.holdsListed = page.HoldsListed
		if q.limit > 0 {
			o.Limit = max(q.limit-ls.found(), 1)
		}
		ls.skipped = append(ls.skipped, page.Skipped...)
		if page.Cursor == "" {
			break
		}
		if q.limit > 0 && ls.found() >= q.limit {
			ls.truncated = true
			break
		}
		o.Cursor = page.Cursor
	}
	// SCAN may return a key twice.
	ls.locks = byKey(ls.locks, func(in admin.LockInfo) string { return in.Key })
	ls.sems = byKey(ls.sems, func(s admin.SemaphoreInfo) string { return s.Key })
	ls.rws = byKey(ls.rws, func(rw admin.RWLockInfo) string { return rw.Key })
	if q.limit > 0 && ls.found() > q.limit {
		// The first q.limit: locks, then semaphores, then read-write locks.
		ls.truncated = true
		ls.locks = ls.locks[:min(len(ls.locks), q.limit)]
		ls.sems = ls.sems[:min(len(ls.sems), q.limit-len(ls.locks))]
		ls.rws = ls.rws[:min(len(ls.rws), q.limit-len(ls.locks)-len(ls.sems))]
	}
	return ls, nil
}

// byKey sorts xs by key and keeps one of each key.
func byKey[T any](xs []T, key func(T) string) []T {
	slices.SortStableFunc(xs, func(a, b T) int { return strings.Compare(key(a), key(b)) })
	return slices.CompactFunc(xs, func(a, b T) bool { return key(a) == key(b) })
}

// incomplete is the error of a partial listing: the servers it could not
// read, and what that means. A listing cut by --limit is not one.
func (ls listing) incomplete() error {
	if len(ls.skipped) == 0 {
		return nil
	}
	return fmt.Errorf("the listing is partial: %s; a lock held there may be missing or shown free",
		Plain(errors.Join(ls.skipped...), 0))
}

// json is the listing as the schema writes it; noQueue is the store's
// Traits.NoQueue, given to every lock.
func (ls listing) json(noQueue string) lockview.Listing {
	out := lockview.Listing{
		Schema: lockview.Schema, Complete: len(ls.skipped) == 0 && !ls.truncated,
		Skipped: []string{}, Truncated: ls.truncated, Locks: make([]lockview.Lock, 0, len(ls.locks)),
	}
	for _, err := range ls.skipped {
		out.Skipped = append(out.Skipped, Plain(err, 0))
	}
	for _, in := range ls.locks {
		j := lockview.LockOf(in)
		j.NoQueue = noQueue
		out.Locks = append(out.Locks, j)
	}
	lockview.ListingHolds(&out, ls.holdsListed, ls.sems, ls.rws)
	return out
}

// writeLocks prints the locks table, the semaphores' and the read-write
// locks' (each when it has rows), and what they leave out.
func writeLocks(w io.Writer, ls listing) error {
	if ls.found() == 0 {
		what := "no locks are held"
		if ls.free {
			what = "no lock keys"
		}
		if ls.pattern != "" {
			what += fmt.Sprintf(" whose key matches %q", ls.pattern)
		}
		if len(ls.skipped) > 0 {
			what = "none found where the servers answered (the listing is partial)"
		}
		_, err := fmt.Fprintln(w, what)
		return err
	}
	sections := []struct {
		rows  int
		write func(io.Writer, listing) error
	}{{len(ls.locks), writeLockRows}, {len(ls.sems), writeSemaphoreRows}, {len(ls.rws), writeRWRows}}
	printed := false
	for _, sec := range sections {
		if sec.rows == 0 {
			continue
		}
		if printed {
			fmt.Fprintln(w)
		}
		if err := sec.write(w, ls); err != nil {
			return err
		}
		printed = true
	}
	if ls.truncated {
		what := "locks shown"
		if len(ls.sems)+len(ls.rws) > 0 {
			what = "shown, locks, semaphores and read-write locks together"
		}
		_, err := fmt.Fprintf(w, "(%d %s: the listing stopped at --limit; more may match)\n", ls.found(), what)
		return err
	}
	return nil
}

// writeLockRows prints the locks table.
func writeLockRows(w io.Writer, ls listing) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "KEY\tSTATE\tTOKEN\tOWNER\tHELD FOR\tLEASE LEFT\tCOUNT\tWAITERS")
	for _, in := range ls.locks {
		held, lease, count := "-", "-", "-"
		if d, ok := lockview.HeldFor(in); ok {
			held = human(d)
		}
		if in.State != admin.Free {
			lease, count = human(in.Lease), strconv.Itoa(in.Count)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%d\n", lockview.Visible(in.Key), in.State, tokenText(in.Token),
			lockview.Visible(ownerText(in.Owner, in.Info)), held, lease, count, len(in.Waiters))
	}
	return tw.Flush()
}

// writeSemaphoreRows prints a row per permit held, and one for a semaphore
// that none is (--free).
func writeSemaphoreRows(w io.Writer, ls listing) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "SEMAPHORE\tPERMITS HELD\tTOKEN\tOWNER\tLEASE LEFT")
	for _, s := range ls.sems {
		held := fmt.Sprintf("%d of %d", len(s.Holders), s.Limit)
		if len(s.Holders) == 0 {
			fmt.Fprintf(tw, "%s\t%s\t-\t-\t-\n", lockview.Visible(s.Key), held)
		}
		for _, h := range s.Holders {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", lockview.Visible(s.Key), held, tokenText(h.Token),
				lockview.Visible(ownerText(h.Owner, h.Info)), human(h.Lease))
		}
	}
	return tw.Flush()
}

// writeRWRows prints a row per hold of a read-write lock, and one for a
// read-write lock that none is (waiting writers, or --free).
func writeRWRows(w io.Writer, ls listing) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "READ-WRITE LOCK\tHOLD\tTOKEN\tOWNER\tLEASE LEFT\tWRITERS WAITING")
	for _, rw := range ls.rws {
		holds, kind := rw.Readers, "read"
		if rw.Writer != nil {
			holds, kind = []admin.Holder{*rw.Writer}, "write"
		}
		if len(holds) == 0 {
			fmt.Fprintf(tw, "%s\tnone\t-\t-\t-\t%d\n", lockview.Visible(rw.Key), rw.Waiting)
		}
		for _, h := range holds {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\n", lockview.Visible(rw.Key), kind, tokenText(h.Token),
				lockview.Visible(ownerText(h.Owner, h.Info)), human(h.Lease), rw.Waiting)
		}
	}
	return tw.Flush()
}
