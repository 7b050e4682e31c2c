package cli

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/redfence/redfence/internal/lockview"
)

// command is one of redfence's commands.
type command struct {
	name     string
	synopsis string // its arguments and flags, as usage shows them
	summary  string // what it does, for the command list
	about    string // more, for its own help
	minArgs  int
	maxArgs  int
	// setup declares the command's own flags on fs and returns what runs
	// the command once they are parsed.
	setup func(fs *flag.FlagSet) runFunc
}

type runFunc func(ctx context.Context, inv *invocation, args []string) error

// commands in the order usage lists them.
var commands = []command{
	{
		name: "locks", synopsis: "[--json] [--free] [--limit N] [PATTERN]", maxArgs: 1, setup: setupLocks,
		summary: "list the locks, semaphores and read-write locks matching PATTERN (a Redis glob, default *)",
		about: `Lists the held and reserved locks whose keys (as given to Lock) match
PATTERN, a Redis glob: * any run, ? one byte, [abc], \ quotes, then the
semaphores' permits held and the read-write locks' holds, a row for each
holder (where the store keeps them: not Redlock, not etcd). Every master
of a Cluster and every Redlock node is scanned, page after page, each page
under its own --timeout. HELD FOR and LEASE LEFT are by the Redis server's
clock. Keys and owners that hold control, invisible or non-UTF-8 bytes, or
start with ", print quoted as Go strings ("tab\tkey").

It never reports "no locks" when it could not look: fewer than a quorum of
Redlock nodes answering is an error; a listing that skipped a node prints
what it found, says it is partial, and exits 1.`,
	},
	{
		name: "inspect", synopsis: "[--json] (KEY | --key-hex HEX)", maxArgs: 1, setup: setupInspect,
		summary: "everything about one key: holder, token, lease, waiters, forced releases",
		about: `Shows one key as its servers hold it: state, holder and its owner info,
token, when it was acquired and renewed, lease left, re-entries, the
Lockers queued for it, the latest forced releases, and for Redlock each
node's view; then the semaphore and the read-write lock of the same name,
with their holders. A key is called free only when none of them holds
it. A free lock shows the last token issued; a key nothing holds, the
held keys that differ from it by an adapter's prefix (asynqlock locks
"asynq:KEY"). A held lock shows the release line that ends this holder
and no other:

  redfence release --token N --force --reason REASON -- 'KEY'`,
	},
	{
		name: "watch", synopsis: "[--interval D] [--limit N] [--free] [PATTERN]", maxArgs: 1, setup: setupWatch,
		summary: "the locks table, redrawn every --interval until Ctrl-C",
		about: `Clears the terminal and redraws the locks table every --interval (at least
500ms), showing at most what fits the terminal (--limit): the listing stops
there. A failed refresh shows its error and the next one tries again.
Ctrl-C (SIGINT) or SIGTERM quits with status 0.`,
	},
	{
		name: "release", synopsis: "(KEY | --key-hex HEX) --force --reason TEXT [--token N | --yes] [--by NAME] [--fence RESOURCE [--table T]]",
		maxArgs: 1, setup: setupRelease,
		summary: "end a lock behind its holder's back, safely",
		about: `Frees KEY from its holder, who cannot be asked to. It is safe: the key
keeps a token floor above the holder's token, so the holder's next
renewal fails and its lock context ends with ErrLockLost (within a third
of its lease), every later token exceeds the floor, and with --fence the
fence of RESOURCE is raised to the floor at once (DATABASE_URL), so that
the old holder's fenced writes are refused. Who, when, why and the tokens
go to an audit stream beside the key, which inspect shows.

Name the holder by its token, as inspect prints the line:

  redfence release --token 1764612345678901 --force --reason "stuck job" -- 'orders:42'

A holder that released meanwhile, and whoever took the key since, are left
alone. Without --token, release shows the holder there is now (owner,
token, held for) and asks before ending it, unless --yes; it then ends that
holder only. Without --fence it says that the holder's fenced writes still
pass until the fence is raised.`,
	},
	{
		name: "elections", synopsis: "[PATTERN]", maxArgs: 1, setup: setupElections,
		summary: "who leads each election (package election): leader, term, since, held by",
		about: `Lists the elections (package election) whose names match PATTERN, a
Redis glob (default *), that a candidate holds the lock of: the leader's
value, its term (the fencing token its writes carry), when the term began
and the owner info (host, pid) of the Locker that holds the lock, or that
the lock is held but no term began (a new leader in its
lock-delay, or resigning). An election NAME is the lock "election:NAME",
which inspect shows in full.`,
	},
	{
		name: "fences", synopsis: "[--json] [--limit N] [--table T] [PREFIX]", maxArgs: 1, setup: setupFences,
		summary: "the highest token per resource in a fence table (needs DATABASE_URL)",
		about: `Lists the rows of the fence table of package fenced whose resource
starts with PREFIX (literally), ordered by resource: the highest token
accepted for each, and when it was recorded. DATABASE_URL names the
PostgreSQL database.`,
	},
}

func unknownCommand(name string) error {
	return usagef("", "unknown command %q: the commands are locks, inspect, watch, release, elections, fences and help (help json: the JSON schema)", name)
}

func lookup(name string) *command {
	for i := range commands {
		if commands[i].name == name {
			return &commands[i]
		}
	}
	return nil
}

const usageHead = `redfence sees and operates the locks of redfence's mutex package.

Usage:
  redfence [global flags] COMMAND [flags] [arguments]

Commands:
`

const usageTail = `  help [COMMAND | json]
    	this text, a command's, or the schema of --json

Global flags, before or after the command:
%s
%s
Environment:
  DATABASE_URL   the PostgreSQL database of fences and release --fence
  USER           who a forced release is by, with the host name (release --by)

Exit status: 0 done, 1 failed (the error says why), 2 wrongly asked (nothing done).
`

// printUsage writes the general usage, or topic's.
func printUsage(w io.Writer, stores []NewStore, topic string) error {
	g := newGlobals(stores)
	gfs := newFlagSet("redfence")
	g.register(gfs)
	if topic == "" {
		var b strings.Builder
		b.WriteString(usageHead)
		for _, c := range commands {
			fmt.Fprintf(&b, "  %s %s\n    \t%s\n", c.name, c.synopsis, c.summary)
		}
		var servers strings.Builder
		for i, s := range g.stores {
			if i > 0 {
				servers.WriteByte('\n')
			}
			servers.WriteString(s.Usage())
		}
		fmt.Fprintf(&b, usageTail, flagDefaults(gfs), servers.String())
		_, err := io.WriteString(w, b.String())
		return err
	}
	if topic == "json" {
		_, err := io.WriteString(w, lockview.SchemaDoc)
		return err
	}
	c := lookup(topic)
	if c == nil {
		return unknownCommand(topic)
	}
	fs := newFlagSet(c.name)
	c.setup(fs)
	_, err := fmt.Fprintf(w, "Usage: redfence %s %s\n\n%s\n\nFlags:\n%s\nGlobal flags:\n%s", c.name, c.synopsis, c.about, flagDefaults(fs), flagDefaults(gfs))
	return err
}
