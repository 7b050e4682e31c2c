package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"time"
)

// clearScreen moves the cursor home and clears the terminal (ANSI).
const clearScreen = "\x1b[H\x1b[2J"

func setupWatch(fs *flag.FlagSet) runFunc {
	interval := fs.Duration("interval", time.Second, "time `D` between redraws")
	free := fs.Bool("free", false, "include free keys that still keep their last token")
	return func(ctx context.Context, inv *invocation, args []string) error {
		if *interval <= 0 {
			return usagef("watch", "--interval must be positive, got %v", *interval)
		}
		pattern := ""
		if len(args) == 1 {
			pattern = args[0]
		}
		c, err := inv.g.connect()
		if err != nil {
			return err
		}
		defer c.close()
		shown := pattern
		if shown == "" {
			shown = "*"
		}
		ticker := time.NewTicker(*interval)
		defer ticker.Stop()
		var frame bytes.Buffer
		for {
			// A frame is written whole, so the terminal never shows half
			// of one.
			frame.Reset()
			frame.WriteString(clearScreen)
			fmt.Fprintf(&frame, "redfence watch: locks matching %q on %s, every %v. %s. Ctrl-C quits.\n\n",
				shown, c.where(), *interval, time.Now().Format("2006-01-02 15:04:05 MST"))
			locks, err := listLocks(ctx, c, inv.g, pattern, *free)
			if ctx.Err() != nil {
				return nil // interrupted: a clean end
			}
			var usage *usageError
			if errors.As(err, &usage) {
				return err // asked wrongly: no refresh will do better
			}
			if err != nil {
				fmt.Fprintf(&frame, "error: %v\n(trying again in %v)\n", err, *interval)
			} else if err := writeLocks(&frame, locks, pattern, *free); err != nil {
				return err
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
}
