package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"unicode/utf8"

	"github.com/redfence/redfence/mutex"
)

func setupLocks(fs *flag.FlagSet) runFunc {
	asJSON := fs.Bool("json", false, "print a JSON array (see the package doc for its schema)")
	free := fs.Bool("free", false, "include free keys that still keep their last token")
	return func(ctx context.Context, inv *invocation, args []string) error {
		pattern := ""
		if len(args) == 1 {
			pattern = args[0]
		}
		c, err := inv.g.connect()
		if err != nil {
			return err
		}
		defer c.close()
		locks, err := listLocks(ctx, c, inv.g, pattern, *free)
		if err != nil {
			return err
		}
		if *asJSON {
			out := make([]lockJSON, 0, len(locks))
			for _, in := range locks {
				out = append(out, toLockJSON(in))
			}
			return writeJSON(inv.stdout, out)
		}
		return writeLocks(inv.stdout, locks, pattern, *free)
	}
}

// listLocks reads every lock whose key matches pattern, by key, each once.
func listLocks(ctx context.Context, c *conn, g globals, pattern string, free bool) ([]mutex.LockInfo, error) {
	ctx, cancel := context.WithTimeout(ctx, g.timeout)
	defer cancel()
	locks, err := c.locker.ListAll(ctx, mutex.ListOptions{Match: pattern, Free: free})
	if err != nil {
		return nil, c.explain(err, g.timeout)
	}
	slices.SortStableFunc(locks, func(a, b mutex.LockInfo) int { return strings.Compare(a.Key, b.Key) })
	// SCAN may return a key twice.
	return slices.CompactFunc(locks, func(a, b mutex.LockInfo) bool { return a.Key == b.Key }), nil
}

// writeLocks prints the locks table.
func writeLocks(w io.Writer, locks []mutex.LockInfo, pattern string, free bool) error {
	if len(locks) == 0 {
		what := "no locks are held"
		if free {
			what = "no lock keys"
		}
		if pattern != "" {
			what += fmt.Sprintf(" whose key matches %q", pattern)
		}
		_, err := fmt.Fprintln(w, what)
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "KEY\tSTATE\tTOKEN\tOWNER\tHELD FOR\tLEASE LEFT\tCOUNT\tWAITERS")
	for _, in := range locks {
		held, lease, count := "-", "-", "-"
		if d, ok := heldFor(in); ok {
			held = human(d)
		}
		if in.State != mutex.Free {
			lease, count = human(in.Lease), strconv.Itoa(in.Count)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%d\n", cell(in.Key), in.State, tokenText(in.Token),
			cell(ownerText(in.Owner, in.Info)), held, lease, count, len(in.Waiters))
	}
	return tw.Flush()
}

// cell makes s safe in one table cell: no tab or line break, no terminal
// control characters (keys and owner ids are anyone's bytes).
func cell(s string) string {
	if utf8.ValidString(s) && !strings.ContainsFunc(s, func(r rune) bool { return !strconv.IsPrint(r) }) {
		return s
	}
	q := strconv.Quote(s)
	return q[1 : len(q)-1]
}
