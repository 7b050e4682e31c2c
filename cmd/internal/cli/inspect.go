package cli

import (
	"cmp"
	"context"
	"encoding/hex"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/redfence/redfence/internal/lockview"
	"github.com/redfence/redfence/mutex"
	"github.com/redfence/redfence/mutex/admin"
)

func setupInspect(fs *flag.FlagSet) runFunc {
	asJSON := fs.Bool("json", false, "print JSON (redfence help json has its schema)")
	keyHex := fs.String("key-hex", "", "the key's bytes in `HEX`, in place of KEY (for a key a shell cannot pass: key_hex in --json)")
	return func(ctx context.Context, inv *invocation, args []string) error {
		key, err := keyArg("inspect", args, *keyHex)
		if err != nil {
			return err
		}
		c, err := inv.connect(ctx)
		if err != nil {
			return err
		}
		defer c.Close()
		var in admin.LockInfo
		elapsed, err := timed(ctx, inv.g.timeout, func(ctx context.Context) (err error) {
			in, err = c.admin.Inspect(ctx, key)
			return err
		})
		if err != nil {
			return explain(c, err, elapsed)
		}
		var sem *lockview.Semaphore
		var rw *lockview.RWLock
		elapsed, err = timed(ctx, inv.g.timeout, func(ctx context.Context) (err error) {
			if sem, err = semaphoreOf(ctx, c.admin, key); err != nil {
				return err
			}
			rw, err = rwLockOf(ctx, c.admin, key)
			return err
		})
		if err != nil {
			return explain(c, err, elapsed)
		}
		words := func(err error) string { return Plain(err, elapsed) }
		if *asJSON {
			j := lockview.InspectionOf(in, words)
			j.NoQueue = c.Traits().NoQueue
			j.Semaphore, j.RWLock, j.HeldAs = sem, rw, lockview.HeldAs(in, sem, rw)
			return writeJSON(inv.stdout, j)
		}
		if err := writeInspect(inv.stdout, inspected{in, sem, rw}, c.Traits(), inv.g.prefix, words); err != nil {
			return err
		}
		if len(lockview.HeldAs(in, sem, rw)) == 0 && !slices.ContainsFunc(in.Nodes, func(n admin.NodeInfo) bool { return n.Err != nil }) {
			return hintPrefixed(ctx, inv, c, key)
		}
		return nil
	}
}

// keyArg is the key a command names: its one argument, or --key-hex's
// bytes.
func keyArg(cmd string, args []string, keyHex string) (string, error) {
	switch {
	case len(args) == 1 && keyHex != "":
		return "", usagef(cmd, "give KEY or --key-hex, not both")
	case len(args) == 1:
		return args[0], nil
	case keyHex == "":
		return "", usagef(cmd, "no key given: KEY, or --key-hex HEX")
	}
	b, err := hex.DecodeString(keyHex)
	if err != nil {
		return "", usagef(cmd, "--key-hex is not hexadecimal: %v", err)
	}
	return string(b), nil
}

// stateWords says what a state means.
var stateWords = map[admin.State]string{
	admin.Free:     "free: nobody holds it",
	admin.Held:     "held",
	admin.Reserved: "reserved: a release kept it for the Locker first in its queue, which is about to take it",
}

// inspected is what inspect read of a key: its lock, and its semaphore and
// read-write lock (nil: none, or a store that keeps none).
type inspected struct {
	lock admin.LockInfo
	sem  *lockview.Semaphore
	rw   *lockview.RWLock
}

// writeInspect prints every field of the lock, in words, then its waiters,
// its forced releases, for Redlock each node's view, and the key's
// semaphore and read-write lock.
func writeInspect(w io.Writer, k inspected, t Traits, prefix string, explain func(error) string) error {
	in := k.lock
	if err := writeFields(w, k, t, prefix); err != nil {
		return err
	}
	if err := writeWaiters(w, in.Waiters, t.NoQueue); err != nil {
		return err
	}
	if err := writeForced(w, in.Forced); err != nil {
		return err
	}
	if err := writeNodes(w, in.Nodes, explain); err != nil {
		return err
	}
	if err := writeSemaphore(w, k.sem); err != nil {
		return err
	}
	return writeRWMutex(w, k.rw)
}

// stateLine says what holds the key: its lock's state and, when they are
// held, its semaphore and read-write lock, so that a key is never called
// free while a permit or a hold of its name is held.
func stateLine(k inspected) string {
	var also []string
	if k.sem != nil && len(k.sem.Holders) > 0 {
		also = append(also, fmt.Sprintf("a semaphore, %d of %d permits", len(k.sem.Holders), k.sem.Limit))
	}
	if k.rw != nil && (k.rw.Writer != nil || len(k.rw.Readers) > 0) {
		also = append(also, "a read-write lock, "+rwWords(k.rw))
	}
	switch {
	case len(also) == 0:
		return stateWords[k.lock.State]
	case k.lock.State == admin.Free:
		return "held as " + strings.Join(also, " and as ") + " (below); its lock is free"
	}
	return stateWords[k.lock.State] + "; also as " + strings.Join(also, " and as ") + " (below)"
}

func writeFields(w io.Writer, k inspected, t Traits, prefix string) error {
	in := k.lock
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	line := func(name, format string, args ...any) { fmt.Fprintf(tw, name+"\t"+format+"\n", args...) }
	line("key", "%s", lockview.Visible(in.Key))
	line(strings.ToLower(t.Store)+" key", "%s", lockview.Visible(in.Name))
	state := stateLine(k)
	if t.Nodes > 1 {
		state += " (the quorum's view; each node's is below)"
	}
	line("state", "%s", state)
	switch {
	case in.State != admin.Free:
		line("token", "%d", in.Token)
	case in.Token != 0:
		line("last token", "%d: every later token exceeds it", in.Token)
	default:
		line("last token", "none remembered")
	}
	if in.State != admin.Free {
		who := "owner"
		if in.State == admin.Reserved {
			who = "reserved for"
		}
		line(who, "%s", lockview.Visible(ownerText(in.Owner, in.Info)))
		line("owner id", "%s", lockview.Visible(in.Owner))
		line("count", "%d (re-entries in %s, plus one)", in.Count, t.Store)
		if d, ok := lockview.HeldFor(in); ok {
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
		if in.State == admin.Held {
			line("release", "%s", releaseLine(in, prefix))
		}
	}
	line("server time", "%s", stamp(in.ServerTime))
	return tw.Flush()
}

// writeWaiters prints the Lockers queued for the key; noQueue, when set,
// says why the store shows none.
func writeWaiters(w io.Writer, waiters []admin.Waiter, noQueue string) error {
	switch {
	case noQueue != "":
		_, err := fmt.Fprintln(w, "\nwaiters: "+noQueue)
		return err
	case len(waiters) == 0:
		_, err := fmt.Fprintln(w, "\nwaiters: none")
		return err
	}
	fmt.Fprintf(w, "\nwaiters: %d, longest waiting first\n", len(waiters))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  LOCKER\tWAITED FOR\tSINCE\tLOCKER ID")
	for _, wt := range waiters {
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\n", lockview.Visible(ownerText("", wt.Info)), human(wt.Waited), stamp(wt.Since), lockview.Visible(wt.Locker))
	}
	return tw.Flush()
}

func writeForced(w io.Writer, forced []admin.ForcedRelease) error {
	if len(forced) == 0 {
		_, err := fmt.Fprintln(w, "\nforced releases: none")
		return err
	}
	fmt.Fprintf(w, "\nforced releases: %d, latest first\n", len(forced))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  AT\tBY\tREASON\tTOKEN → FLOOR\tHOLDER")
	for _, f := range forced {
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%d → %d\t%s\n", stamp(f.At), lockview.Visible(f.By), lockview.Visible(f.Reason), f.Token, f.Floor, lockview.Visible(ownerText(f.Owner, f.Info)))
	}
	return tw.Flush()
}

func writeNodes(w io.Writer, nodes []admin.NodeInfo, explain func(error) string) error {
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
		if n.Info.State != admin.Free {
			lease = human(n.Info.Lease)
		}
		fmt.Fprintf(tw, "  %d\t%s\t%s\t%s\t%s\t%s\n", n.Node, addr, n.Info.State, tokenText(n.Info.Token), lockview.Visible(ownerText(n.Info.Owner, n.Info.Info)), lease)
	}
	return tw.Flush()
}

// releaseLine is the release command that ends in's holder and no other:
// it carries the holder's token, so a later holder is never ended.
func releaseLine(in admin.LockInfo, prefix string) string {
	line := fmt.Sprintf("redfence release --token %d --force --reason REASON", in.Token)
	if prefix != defaultPrefix {
		line += " --prefix " + shellQuote(prefix)
	}
	return line + " " + argOf(in.Key)
}

// shellQuote quotes s for a POSIX shell.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// adapterPrefixes are what redfence's adapters put before the keys they
// lock: a key named in the application's words is held under one of them.
var adapterPrefixes = []struct{ prefix, adapter string }{
	{"asynq:", "asynqlock"},
	{"runner:", "runner"},
	{"httplock:", "httplock"},
}

// hintPrefixed tells, after a free key, which keys that differ from it by
// an adapter's prefix are held. It is a hint: a failed look says nothing,
// and all the looks share one --timeout.
func hintPrefixed(ctx context.Context, inv *invocation, c *session, key string) error {
	ctx, cancel := context.WithTimeout(ctx, inv.g.timeout)
	defer cancel()
	for _, a := range adapterPrefixes {
		other, ok := strings.CutPrefix(key, a.prefix)
		if !ok {
			other = a.prefix + key
		}
		if other == "" || len(other) > mutex.MaxKeyLen {
			continue
		}
		var in admin.LockInfo
		_, err := timed(ctx, inv.g.timeout, func(ctx context.Context) (err error) {
			in, err = c.admin.Inspect(ctx, other)
			return err
		})
		if err == nil && in.State != admin.Free {
			_, err := fmt.Fprintf(inv.stdout, "\nnote: %s is %s: %s puts %q before the keys it locks; see redfence inspect %s\n",
				lockview.Visible(other), in.State, a.adapter, a.prefix, argOf(other))
			if err != nil {
				return err
			}
		}
	}
	return nil
}

// argOf is key as the last argument of inspect or release, for a shell.
func argOf(key string) string {
	if lockview.Visible(key) != key || strings.ContainsRune(key, 0) {
		return "--key-hex " + hex.EncodeToString([]byte(key))
	}
	return "-- " + shellQuote(key)
}
