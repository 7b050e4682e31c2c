package cli

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"time"
)

// clearScreen moves the cursor home and clears the terminal (ANSI).
const clearScreen = "\x1b[H\x1b[2J"

// minInterval bounds how often watch lists: each redraw reads every lock
// the listing finds, on every server.
const minInterval = 500 * time.Millisecond

// watchRows is watch's --limit when the terminal's height is unknown.
const watchRows = 40

func setupWatch(fs *flag.FlagSet) runFunc {
	interval := fs.Duration("interval", time.Second, "time `D` between redraws, at least "+minInterval.String())
	free := fs.Bool("free", false, "include free keys that still keep their last token")
	limit := fs.Int("limit", 0, fmt.Sprintf("show at most `N` locks, semaphores and read-write locks (default: what fits the terminal, else %d); the listing stops there", watchRows))
	return func(ctx context.Context, inv *invocation, args []string) error {
		if *interval < minInterval {
			return usagef("watch", "--interval must be at least %v, got %v: each redraw reads every lock it shows", minInterval, *interval)
		}
		if *limit < 0 {
			return usagef("watch", "--limit must be positive, got %d", *limit)
		}
		q := listQuery{free: *free, limit: *limit}
		if len(args) == 1 {
			q.pattern = args[0]
		}
		if q.limit == 0 {
			q.limit = watchRows
			if rows := terminalRows(os.Stdout); inv.stdout == os.Stdout && rows > 0 {
				q.limit = max(rows-6, 1) // the header, the table's head and a note
			}
		}
		if err := checkPattern(q.pattern); err != nil {
			return err
		}
		c, err := inv.g.dial()
		if err != nil {
			return err
		}
		defer c.Close()
		return watch(ctx, inv, c, q, *interval)
	}
}

// watch redraws the locks table every interval until ctx ends. Until the
// servers first answer the probe, each frame tries it again.
func watch(ctx context.Context, inv *invocation, c *session, q listQuery, interval time.Duration) error {
	probed := false
	shown := q.pattern
	if shown == "" {
		shown = "*"
	}
	ticker := time.NewTicker(interval)
	defer ticker.Stop()
	var frame bytes.Buffer
	for {
		// A frame is written whole, so the terminal never shows half
		// of one.
		frame.Reset()
		frame.WriteString(clearScreen)
		fmt.Fprintf(&frame, "redfence watch: locks matching %q on %s, every %v. %s. Ctrl-C quits.\n\n",
			shown, c.Where(), interval, time.Now().Format("2006-01-02 15:04:05 MST"))
		var ls listing
		var err error
		if !probed {
			err = c.Probe(ctx, inv.g.timeout, inv.warn)
			probed = err == nil
		}
		if err == nil {
			ls, err = listLocks(ctx, c, inv.g, q)
		}
		if ctx.Err() != nil {
			return nil // interrupted: a clean end
		}
		var usage *usageError
		if errors.As(err, &usage) {
			return err // asked wrongly: no refresh will do better
		}
		if err == nil {
			err = writeLocks(&frame, ls)
		}
		if err == nil {
			err = ls.incomplete()
		}
		if err != nil {
			fmt.Fprintf(&frame, "error: %v\n(trying again in %v)\n", err, interval)
		}
		if _, err := inv.stdout.Write(frame.Bytes()); err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return nil
		case <-ticker.C:
		}
	}
}
