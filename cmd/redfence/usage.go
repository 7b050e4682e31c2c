package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strings"
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
		name: "locks", synopsis: "[--json] [--free] [PATTERN]", maxArgs: 1, setup: setupLocks,
		summary: "list the locks whose keys match PATTERN (a Redis glob, default *)",
		about: `Lists the held and reserved locks whose keys (as given to Lock) match
PATTERN, a Redis glob: * any run, ? one byte, [abc], \ quotes. Every master
of a Cluster and every Redlock node is scanned. HELD FOR and LEASE LEFT are
by the Redis server's clock.`,
	},
	{
		name: "inspect", synopsis: "[--json] KEY", minArgs: 1, maxArgs: 1, setup: setupInspect,
		summary: "everything about one key: holder, token, lease, waiters, forced releases",
		about: `Shows one key as its servers hold it: state, holder and its owner info,
token, when it was acquired and renewed, lease left, re-entries, the
Lockers queued for it, the latest forced releases, and for Redlock each
node's view. A free key shows the last token issued.`,
	},
	{
		name: "watch", synopsis: "[--interval D] [--free] [PATTERN]", maxArgs: 1, setup: setupWatch,
		summary: "the locks table, redrawn every --interval until Ctrl-C",
		about: `Clears the terminal and redraws the locks table every --interval. A
failed refresh shows its error and the next one tries again. Ctrl-C
(SIGINT) or SIGTERM quits with status 0.`,
	},
	{
		name: "release", synopsis: "KEY --force --reason TEXT [--token N] [--by NAME] [--fence RESOURCE [--table T]]",
		minArgs: 1, maxArgs: 1, setup: setupRelease,
		summary: "end a lock behind its holder's back, safely",
		about: `Frees KEY from its holder, who cannot be asked to. It is safe: the key
keeps a token floor above the holder's token, so the holder's next
renewal fails and its lock context ends with ErrLockLost (within a third
of its lease), every later token exceeds the floor, and with --fence the
fence of RESOURCE is raised to the floor at once (DATABASE_URL), so that
the old holder's fenced writes are refused. Who, when, why and the tokens
go to an audit stream beside the key, which inspect shows.

Without --token it reads the holder's token first and ends that holder
only: a lock taken meanwhile by someone else is never ended.`,
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
	return usagef("", "unknown command %q: the commands are locks, inspect, watch, release, fences and help", name)
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

const usageTail = `  help [COMMAND]
    	this text, or a command's

Global flags, before or after the command:
%s
Redis URLs:
  redis://[user:pass@]host:port[/db]      one server (rediss:// for TLS)
  redis://host:port?master_name=NAME      Sentinel: host:port is a sentinel
  redis://host:port?cluster=true          Cluster: host:port is a node; addr=host:port
                                          parameters name more nodes (and mean Cluster)
  --redis three or more times             Redlock: independent masters, quorum N/2+1

Environment:
  REDIS_URL      the Redis URL when --redis is not given
  DATABASE_URL   the PostgreSQL database of fences and release --fence
  USER           who a forced release is by, with the host name (release --by)

Exit status: 0 done, 1 failed (the error says why), 2 wrongly asked (nothing done).
`

// printUsage writes the general usage, or topic's.
func printUsage(w io.Writer, topic string) error {
	g := newGlobals()
	gfs := newFlagSet("redfence")
	g.register(gfs)
	if topic == "" {
		var b strings.Builder
		b.WriteString(usageHead)
		for _, c := range commands {
			fmt.Fprintf(&b, "  %s %s\n    \t%s\n", c.name, c.synopsis, c.summary)
		}
		fmt.Fprintf(&b, usageTail, flagDefaults(gfs))
		_, err := io.WriteString(w, b.String())
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
