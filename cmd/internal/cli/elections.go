package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/redfence/redfence/election"
	"github.com/redfence/redfence/internal/lockview"
	"github.com/redfence/redfence/mutex"
)

// electionRow is one election as the command shows it.
type electionRow struct {
	name   string
	leader election.Leader
	err    error // election.ErrNoLeader: held, but nobody leads
	// holder is the OwnerInfo of the Locker that holds the election's
	// lock under the leader's term, as the listing read it: zero when it
	// carries none (an older candidate) or the term changed since.
	holder mutex.OwnerInfo
}

func setupElections(*flag.FlagSet) runFunc {
	return func(ctx context.Context, inv *invocation, args []string) error {
		pattern := "*"
		if len(args) == 1 {
			pattern = args[0]
		}
		if err := checkPattern(election.KeyPrefix + pattern); err != nil {
			return err
		}
		c, err := inv.connect(ctx)
		if err != nil {
			return err
		}
		defer c.Close()
		ls, err := listLocks(ctx, c, inv.g, listQuery{pattern: election.KeyPrefix + pattern})
		if err != nil {
			return err
		}
		rows := make([]electionRow, 0, len(ls.locks))
		for _, in := range ls.locks {
			row := electionRow{name: strings.TrimPrefix(in.Key, election.KeyPrefix)}
			e, err := election.New(c.Locker(), row.name)
			if err != nil {
				return err
			}
			elapsed, err := timed(ctx, inv.g.timeout, func(ctx context.Context) (err error) {
				row.leader, err = e.Leader(ctx)
				return err
			})
			if err != nil && !errors.Is(err, election.ErrNoLeader) {
				return explain(c, err, elapsed)
			}
			row.err = err
			if err == nil && row.leader.Term == in.Token {
				row.holder = in.Info
			}
			rows = append(rows, row)
		}
		if err := writeElections(inv.stdout, rows, pattern); err != nil {
			return err
		}
		return ls.incomplete()
	}
}

// writeElections prints the table of elections, or says there is none.
func writeElections(w io.Writer, rows []electionRow, pattern string) error {
	if len(rows) == 0 {
		_, err := fmt.Fprintf(w, "no election has a candidate holding its lock whose name matches %q\n", pattern)
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ELECTION\tLEADER\tTERM\tSINCE\tHELD BY")
	for _, r := range rows {
		if r.err != nil {
			fmt.Fprintf(tw, "%s\t(none: the lock is held, no term began)\t-\t-\t-\n", lockview.Visible(r.name))
			continue
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", lockview.Visible(r.name), lockview.Visible(r.leader.Value),
			tokenText(r.leader.Term), r.leader.Since.UTC().Format(time.RFC3339Nano), lockview.Visible(ownerText("", r.holder)))
	}
	return tw.Flush()
}
