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
	limit := fs.Int("limit", 0, "stop after `N` locks are found (default: all)")
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

// listing is what a listing found: its locks by key, each once.
type listing struct {
	listQuery
	locks     []admin.LockInfo
	skipped   []error // partial: what could not be read
	truncated bool    // stopped at the limit: more may match
}

// listLocks reads the locks whose keys match q.pattern, page after page,
// each page under its own --timeout, until the listing ends or q.limit
// locks were found.
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
		if q.limit > 0 {
			o.Limit = max(q.limit-len(ls.locks), 1)
		}
		ls.skipped = append(ls.skipped, page.Skipped...)
		if page.Cursor == "" {
			break
		}
		if q.limit > 0 && len(ls.locks) >= q.limit {
			ls.truncated = true
			break
		}
		o.Cursor = page.Cursor
	}
	slices.SortStableFunc(ls.locks, func(a, b admin.LockInfo) int { return strings.Compare(a.Key, b.Key) })
	// SCAN may return a key twice.
	ls.locks = slices.CompactFunc(ls.locks, func(a, b admin.LockInfo) bool { return a.Key == b.Key })
	if q.limit > 0 && len(ls.locks) > q.limit {
		ls.locks, ls.truncated = ls.locks[:q.limit], true
	}
	return ls, nil
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
	return out
}

// writeLocks prints the locks table, and what it leaves out.
func writeLocks(w io.Writer, ls listing) error {
	if len(ls.locks) == 0 {
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
	if err := tw.Flush(); err != nil {
		return err
	}
	if ls.truncated {
		_, err := fmt.Fprintf(w, "(%d locks shown: the listing stopped at --limit; more may match)\n", len(ls.locks))
		return err
	}
	return nil
}
