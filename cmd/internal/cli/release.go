package cli

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/user"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/redfence/redfence/fenced"
	"github.com/redfence/redfence/internal/lockview"
	"github.com/redfence/redfence/mutex"
	"github.com/redfence/redfence/mutex/admin"
)

// refusal is why release does nothing without --force.
const refusal = `release needs --force: an operator cannot release a lock the usual way,
which only its holder can do; a forced release ends it behind the holder's back.
It is safe: the holder's next renewal fails and its lock context ends, every
later token is larger, and --fence RESOURCE refuses the holder's fenced writes
at once. Add --force --reason TEXT --token N (inspect prints the line) to do it`

type releaseFlags struct {
	force  bool
	yes    bool
	reason string
	token  int64
	by     string
	fence  string
	table  string
	keyHex string
}

func setupRelease(fs *flag.FlagSet) runFunc {
	var f releaseFlags
	fs.BoolVar(&f.force, "force", false, "do it: the only kind of release an operator can do (required)")
	fs.StringVar(&f.reason, "reason", "", "why, in `TEXT` for the audit stream beside the key (required)")
	fs.Int64Var(&f.token, "token", 0, "end the holder with token `N` only, as inspect showed it (default: show the holder there is now and ask)")
	fs.BoolVar(&f.yes, "yes", false, "without --token, end the holder there is now without asking")
	fs.StringVar(&f.by, "by", "", "who forces it, by `NAME` in the audit stream (default $USER@hostname)")
	fs.StringVar(&f.fence, "fence", "", "then raise the fence of `RESOURCE` to the floor (needs DATABASE_URL)")
	fs.StringVar(&f.table, "table", fenced.DefaultTable, "fence table `T`, for --fence")
	fs.StringVar(&f.keyHex, "key-hex", "", "the key's bytes in `HEX`, in place of KEY")
	return func(ctx context.Context, inv *invocation, args []string) error {
		key, err := keyArg("release", args, f.keyHex)
		if err != nil {
			return err
		}
		return release(ctx, inv, key, f)
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
	db, err := checkFence(ctx, inv, f)
	if err != nil {
		return err
	}
	if db != nil {
		defer db.close()
	}
	c, err := inv.connect(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	if f.token == 0 {
		if f.token, err = confirmHolder(ctx, inv, c, key, f.yes); err != nil {
			return err
		}
	}
	var res admin.ForceResult
	elapsed, err := timed(ctx, inv.g.timeout, func(ctx context.Context) (err error) {
		res, err = c.admin.ForceRelease(ctx, key, admin.ForceOptions{Token: f.token, By: f.by, Reason: f.reason})
		return err
	})
	switch {
	case errors.Is(err, mutex.ErrNotHeld):
		return errors.New(Plain(err, elapsed))
	case errors.Is(err, context.Canceled):
		return fmt.Errorf("interrupted: the release was sent, and its outcome is unknown; see redfence inspect %s", argOf(key))
	case errors.Is(err, mutex.ErrUnavailable) && !errors.Is(err, context.Canceled):
		return fmt.Errorf("the release's outcome is unknown, the holder may keep the lock: %v; see redfence inspect %s",
			explain(c, err, elapsed), argOf(key))
	case err != nil:
		return explain(c, err, elapsed)
	}
	if err := writeReleased(inv.stdout, res, f, c.Traits().Nodes); err != nil {
		return err
	}
	return raiseFence(ctx, inv, db, f, res)
}

// checkFence opens the database of --fence and reads the fence before the
// release, so that a database that cannot be reached or has no fence table
// leaves the lock as it is; nil without --fence.
func checkFence(ctx context.Context, inv *invocation, f releaseFlags) (*fenceDB, error) {
	if f.fence == "" {
		return nil, nil
	}
	db, err := openFenceDB(ctx, inv.env, f.table, "--fence raises a fence in a PostgreSQL database")
	if err != nil {
		return nil, err
	}
	elapsed, err := timed(ctx, inv.g.timeout, func(ctx context.Context) error {
		_, err := db.guard.Fences(ctx, f.fence, 1)
		return err
	})
	if err != nil {
		db.close()
		return nil, db.explain(err, elapsed)
	}
	return db, nil
}

// confirmHolder shows the holder of key that a release without --token
// would end, asks whether to (unless yes), and returns its token: the
// release then ends that holder only, never one who took the key since.
func confirmHolder(ctx context.Context, inv *invocation, c *session, key string, yes bool) (int64, error) {
	var in admin.LockInfo
	elapsed, err := timed(ctx, inv.g.timeout, func(ctx context.Context) (err error) {
		in, err = c.admin.Inspect(ctx, key)
		return err
	})
	switch {
	case err != nil:
		return 0, explain(c, err, elapsed)
	case in.State == admin.Free:
		return 0, fmt.Errorf("nobody holds %s", strconv.Quote(key))
	case in.State == admin.Reserved:
		return 0, fmt.Errorf("nobody holds %s: it is kept for a waiting Locker, which is about to take it", strconv.Quote(key))
	}
	held := "unknown"
	if d, ok := lockview.HeldFor(in); ok {
		held = human(d)
	}
	fmt.Fprintf(inv.stdout, "about to end the holder of %s:\n", strconv.Quote(key))
	tw := tabwriter.NewWriter(inv.stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "  holder\t%s\n  owner id\t%s\n  token\t%d\n  held for\t%s\n",
		lockview.Visible(ownerText(in.Owner, in.Info)), lockview.Visible(in.Owner), in.Token, held)
	if err := tw.Flush(); err != nil || yes {
		return in.Token, err
	}
	fmt.Fprintf(inv.stdout, "End this holder (token %d)? [y/N] ", in.Token)
	ok, err := confirmed(ctx, inv.stdin)
	if err != nil {
		return 0, err
	}
	if !ok {
		return 0, errors.New("not confirmed: nothing was changed (--yes, or --token N, releases without asking)")
	}
	return in.Token, nil
}

// confirmed reads one answer from in: y or yes, in any case. It returns
// when ctx ends, leaving the read to the process's end.
func confirmed(ctx context.Context, in io.Reader) (bool, error) {
	if in == nil {
		return false, nil // no input: no answer
	}
	answer := make(chan string, 1)
	go func() {
		line, _ := bufio.NewReader(in).ReadString('\n')
		answer <- strings.ToLower(strings.TrimSpace(line))
	}()
	select {
	case a := <-answer:
		return a == "y" || a == "yes", nil
	case <-ctx.Done():
		return false, errors.New("interrupted: nothing was changed")
	}
}

// raiseFence raises --fence's fence to the release's floor, or says that
// the holder's fenced writes still pass until something raises it.
func raiseFence(ctx context.Context, inv *invocation, db *fenceDB, f releaseFlags, res admin.ForceResult) error {
	if db == nil {
		_, err := fmt.Fprintf(inv.stdout, "fence not raised: the holder's writes through a fence still pass until a token above %d is recorded there;\n"+
			"  raise it now with --fence RESOURCE (DATABASE_URL), or fenced.Guard.Raise(ctx, resource, %d)\n", res.Token, res.Floor)
		return err
	}
	var highest int64
	elapsed, err := timed(ctx, inv.g.timeout, func(ctx context.Context) (err error) {
		highest, err = db.guard.Raise(ctx, f.fence, res.Floor)
		return err
	})
	if err != nil {
		// %v: a failure after the release is never a usage error.
		return fmt.Errorf("the lock was released, but its fence was not raised: %v; raise the fence of %q to %d by hand",
			db.explain(err, elapsed), f.fence, res.Floor)
	}
	_, err = fmt.Fprintf(inv.stdout, "fence of %q in %s raised: highest token %d; writes with lower tokens are refused\n", f.fence, f.table, highest)
	return err
}

// writeReleased prints what a forced release did; nodes are the Redlock
// masters it was sent to (1: one deployment).
func writeReleased(w io.Writer, res admin.ForceResult, f releaseFlags, nodes int) error {
	fmt.Fprintf(w, "released %s by force\n", strconv.Quote(res.Key))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "  holder\t%s\n", lockview.Visible(ownerText(res.Owner, res.Info)))
	fmt.Fprintf(tw, "  owner id\t%s\n", lockview.Visible(res.Owner))
	fmt.Fprintf(tw, "  token\t%d: the holder's; its next renewal fails and its lock context ends\n", res.Token)
	fmt.Fprintf(tw, "  floor\t%d: every later token of %s exceeds it\n", res.Floor, strconv.Quote(res.Key))
	if nodes > 1 {
		fmt.Fprintf(tw, "  nodes\treleased on %d of %d\n", res.Released, nodes)
	}
	fmt.Fprintf(tw, "  audit\tby %s, reason %q\n", lockview.Visible(f.by), f.reason)
	return tw.Flush()
}

// defaultBy is who a forced release is by: $USER (else $LOGNAME, else the
// account of the process's user id) at the host name.
func defaultBy(env func(string) string) string {
	name := env("USER")
	if name == "" {
		name = env("LOGNAME")
	}
	if name == "" {
		if u, err := user.Current(); err == nil && u.Username != "" {
			name = u.Username
		} else {
			name = "uid " + strconv.Itoa(os.Getuid())
		}
	}
	host, err := os.Hostname()
	if err != nil || host == "" {
		return name
	}
	return name + "@" + host
}
