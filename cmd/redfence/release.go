package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"text/tabwriter"

	"github.com/redfence/redfence/fenced"
	"github.com/redfence/redfence/mutex"
)

// refusal is why release does nothing without --force.
const refusal = `release needs --force: an operator cannot release a lock the usual way,
which only its holder can do; a forced release ends it behind the holder's back.
It is safe: the holder's next renewal fails and its lock context ends, every
later token is larger, and --fence RESOURCE refuses the holder's fenced writes
at once. Add --force --reason TEXT to do it`

type releaseFlags struct {
	force  bool
	reason string
	token  int64
	by     string
	fence  string
	table  string
}

func setupRelease(fs *flag.FlagSet) runFunc {
	var f releaseFlags
	fs.BoolVar(&f.force, "force", false, "do it: the only kind of release an operator can do (required)")
	fs.StringVar(&f.reason, "reason", "", "why, in `TEXT` for the audit stream beside the key (required)")
	fs.Int64Var(&f.token, "token", 0, "end the holder with token `N` only (default: the token the holder has now)")
	fs.StringVar(&f.by, "by", "", "who forces it, by `NAME` in the audit stream (default $USER@hostname)")
	fs.StringVar(&f.fence, "fence", "", "then raise the fence of `RESOURCE` to the floor (needs DATABASE_URL)")
	fs.StringVar(&f.table, "table", fenced.DefaultTable, "fence table `T`, for --fence")
	return func(ctx context.Context, inv *invocation, args []string) error {
		return release(ctx, inv, args[0], f)
	}
}

func release(ctx context.Context, inv *invocation, key string, f releaseFlags) error {
	switch {
	case !f.force:
		return usagef("release", "%s.", refusal)
	case f.reason == "":
		return usagef("release", "a forced release needs --reason TEXT: it goes to the audit stream beside the key")
	case f.token < 0:
		return usagef("release", "--token must be positive, got %d", f.token)
	}
	if f.by == "" {
		f.by = defaultBy(inv.env)
	}
	ctx, cancel := context.WithTimeout(ctx, inv.g.timeout)
	defer cancel()
	var db *fenceDB
	if f.fence != "" {
		// Before the release, so that a database that cannot be reached
		// or has no fence table leaves the lock as it is.
		var err error
		if db, err = openFenceDB(ctx, inv.env, f.table, "--fence raises a fence in a PostgreSQL database"); err != nil {
			return err
		}
		defer db.close()
		if _, err := db.guard.Fences(ctx, f.fence, 1); err != nil {
			return db.explain(err, inv.g.timeout)
		}
	}
	c, err := inv.g.connect()
	if err != nil {
		return err
	}
	defer c.close()
	res, err := endHolder(ctx, c.locker, key, mutex.ForceOptions{Token: f.token, By: f.by, Reason: f.reason})
	if errors.Is(err, mutex.ErrNotHeld) {
		return errors.New(plain(err, inv.g.timeout))
	}
	if err != nil {
		return c.explain(err, inv.g.timeout)
	}
	if err := writeReleased(inv.stdout, res, f, len(c.servers)); err != nil {
		return err
	}
	if db == nil {
		return nil
	}
	highest, err := db.guard.Raise(ctx, f.fence, res.Floor)
	if err != nil {
		// %v: a failure after the release is never a usage error.
		return fmt.Errorf("the lock was released, but its fence was not raised: %v; raise the fence of %q to %d by hand",
			db.explain(err, inv.g.timeout), f.fence, res.Floor)
	}
	_, err = fmt.Fprintf(inv.stdout, "fence of %q in %s raised: highest token %d; writes with lower tokens are refused\n", f.fence, f.table, highest)
	return err
}

// forcer is what a forced release needs of a Locker.
type forcer interface {
	Inspect(ctx context.Context, key string) (mutex.LockInfo, error)
	ForceRelease(ctx context.Context, key string, o mutex.ForceOptions) (mutex.ForceResult, error)
}

// endHolder forces key free from the holder with token o.Token or, when
// that is 0, from the holder l sees now, and from no one else: if that
// holder releases and someone takes the key before the forced release
// arrives, it changes nothing and returns an error matching
// mutex.ErrNotHeld, as it does for a free or reserved key.
func endHolder(ctx context.Context, l forcer, key string, o mutex.ForceOptions) (mutex.ForceResult, error) {
	if o.Token == 0 {
		in, err := l.Inspect(ctx, key)
		if err != nil {
			return mutex.ForceResult{}, err
		}
		switch in.State {
		case mutex.Free:
			return mutex.ForceResult{}, fmt.Errorf("%w: nobody holds %q", mutex.ErrNotHeld, key)
		case mutex.Reserved:
			return mutex.ForceResult{}, fmt.Errorf("%w: nobody holds %q: it is kept for a waiting Locker, which is about to take it", mutex.ErrNotHeld, key)
		}
		o.Token = in.Token
	}
	return l.ForceRelease(ctx, key, o)
}

// writeReleased prints what a forced release did.
func writeReleased(w io.Writer, res mutex.ForceResult, f releaseFlags, servers int) error {
	fmt.Fprintf(w, "released %q by force\n", res.Key)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "  holder\t%s\n", cell(ownerText(res.Owner, res.Info)))
	fmt.Fprintf(tw, "  owner id\t%s\n", cell(res.Owner))
	fmt.Fprintf(tw, "  token\t%d: the holder's; its next renewal fails and its lock context ends\n", res.Token)
	fmt.Fprintf(tw, "  floor\t%d: every later token of %q exceeds it\n", res.Floor, res.Key)
	if servers > 1 {
		fmt.Fprintf(tw, "  nodes\treleased on %d of %d\n", res.Released, servers)
	}
	fmt.Fprintf(tw, "  audit\tby %s, reason %q\n", cell(f.by), f.reason)
	return tw.Flush()
}

// defaultBy is who a forced release is by: $USER@hostname.
func defaultBy(env func(string) string) string {
	user := env("USER")
	if user == "" {
		user = env("LOGNAME")
	}
	if user == "" {
		user = "unknown"
	}
	host, err := os.Hostname()
	if err != nil || host == "" {
		return user
	}
	return user + "@" + host
}
