package main

import (
	"cmp"
	"context"
	"flag"
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/redfence/redfence/mutex"
)

func setupInspect(fs *flag.FlagSet) runFunc {
	asJSON := fs.Bool("json", false, "print a JSON object (see the package doc for its schema)")
	return func(ctx context.Context, inv *invocation, args []string) error {
		c, err := inv.g.connect()
		if err != nil {
			return err
		}
		defer c.close()
		ctx, cancel := context.WithTimeout(ctx, inv.g.timeout)
		defer cancel()
		in, err := c.locker.Inspect(ctx, args[0])
		if err != nil {
			return c.explain(err, inv.g.timeout)
		}
		explain := func(err error) string { return plain(err, inv.g.timeout) }
		if *asJSON {
			return writeJSON(inv.stdout, toInspectJSON(in, explain))
		}
		return writeInspect(inv.stdout, in, c.redlock(), explain)
	}
}

// stateWords says what a state means.
var stateWords = map[mutex.State]string{
	mutex.Free:     "free: nobody holds it",
	mutex.Held:     "held",
	mutex.Reserved: "reserved: a release kept it for the Locker first in its queue, which is about to take it",
}

// writeInspect prints every field of in, in words, then its waiters, its
// forced releases and, for Redlock, each node's view.
func writeInspect(w io.Writer, in mutex.LockInfo, redlock bool, explain func(error) string) error {
	if err := writeFields(w, in, redlock); err != nil {
		return err
	}
	if err := writeWaiters(w, in.Waiters, redlock); err != nil {
		return err
	}
	if err := writeForced(w, in.Forced); err != nil {
		return err
	}
	return writeNodes(w, in.Nodes, explain)
}

func writeFields(w io.Writer, in mutex.LockInfo, redlock bool) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	line := func(name, format string, args ...any) { fmt.Fprintf(tw, name+"\t"+format+"\n", args...) }
	line("key", "%s", cell(in.Key))
	line("redis key", "%s", cell(in.Name))
	state := stateWords[in.State]
	if redlock {
		state += " (the quorum's view; each node's is below)"
	}
	line("state", "%s", state)
	switch {
	case in.State != mutex.Free:
		line("token", "%d", in.Token)
	case in.Token != 0:
		line("last token", "%d: every later token exceeds it", in.Token)
	default:
		line("last token", "none remembered")
	}
	if in.State != mutex.Free {
		who := "owner"
		if in.State == mutex.Reserved {
			who = "reserved for"
		}
		line(who, "%s", cell(ownerText(in.Owner, in.Info)))
		line("owner id", "%s", cell(in.Owner))
		line("count", "%d (re-entries in Redis, plus one)", in.Count)
		if d, ok := heldFor(in); ok {
			line("acquired", "%s, %s ago", stamp(in.AcquiredAt), human(d))
		} else {
			line("acquired", "unknown: the token is not a server time (a Redlock token, or one raised above a floor)")
		}
		line("renewed", "%s, %s ago", stamp(in.RenewedAt), human(in.ServerTime.Sub(in.RenewedAt)))
		line("lease left", "%s", human(in.Lease))
		if in.Waited {
			line("waited", "yes: a waiting Lock found it held")
		} else {
			line("waited", "no: nobody waited for it while held")
		}
	}
	line("server time", "%s", stamp(in.ServerTime))
	return tw.Flush()
}

func writeWaiters(w io.Writer, waiters []mutex.Waiter, redlock bool) error {
	switch {
	case redlock:
		_, err := fmt.Fprintln(w, "\nwaiters: Redlock keeps no queue")
		return err
	case len(waiters) == 0:
		_, err := fmt.Fprintln(w, "\nwaiters: none")
		return err
	}
	fmt.Fprintf(w, "\nwaiters: %d, longest waiting first\n", len(waiters))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  LOCKER\tWAITED FOR\tSINCE\tLOCKER ID")
	for _, wt := range waiters {
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\n", cell(ownerText("", wt.Info)), human(wt.Waited), stamp(wt.Since), cell(wt.Locker))
	}
	return tw.Flush()
}

func writeForced(w io.Writer, forced []mutex.ForcedRelease) error {
	if len(forced) == 0 {
		_, err := fmt.Fprintln(w, "\nforced releases: none")
		return err
	}
	fmt.Fprintf(w, "\nforced releases: %d, latest first\n", len(forced))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  AT\tBY\tREASON\tTOKEN → FLOOR\tHOLDER")
	for _, f := range forced {
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%d → %d\t%s\n", stamp(f.At), cell(f.By), cell(f.Reason), f.Token, f.Floor, cell(ownerText(f.Owner, f.Info)))
	}
	return tw.Flush()
}

func writeNodes(w io.Writer, nodes []mutex.NodeInfo, explain func(error) string) error {
	if len(nodes) == 0 {
		return nil
	}
	fmt.Fprintln(w, "\nnodes: each Redlock node's view")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  NODE\tADDR\tSTATE\tTOKEN\tOWNER\tLEASE LEFT")
	for _, n := range nodes {
		addr := cmp.Or(n.Addr, "-")
		if n.Err != nil {
			fmt.Fprintf(tw, "  %d\t%s\terror: %s\t\t\t\n", n.Node, addr, explain(n.Err))
			continue
		}
		lease := "-"
		if n.Info.State != mutex.Free {
			lease = human(n.Info.Lease)
		}
		fmt.Fprintf(tw, "  %d\t%s\t%s\t%s\t%s\t%s\n", n.Node, addr, n.Info.State, tokenText(n.Info.Token), cell(ownerText(n.Info.Owner, n.Info.Info)), lease)
	}
	return tw.Flush()
}
