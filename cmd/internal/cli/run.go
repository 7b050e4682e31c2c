// Package cli is the redfence command, whatever holds the locks: its
// commands run over the *mutex.Locker a Store builds from the global flags.
// cmd/redfence runs it over its Redis, PostgreSQL and etcd Stores (the etcd
// one is cmd/internal/etcdstore). The command's documentation is
// cmd/redfence's.
package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/redis/go-redis/v9"
)

// Main runs the command of os.Args over stores (the first is the default)
// and exits with its status.
func Main(stores ...NewStore) {
	// go-redis logs each failed dial to stderr; the error that ends the
	// command says it once, in words.
	redis.SetLogger(quiet{})
	// The first SIGINT or SIGTERM ends ctx: watch returns 0, the other
	// commands stop what they wait for. Then the signals are let go, so
	// that a second one kills as usual.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	context.AfterFunc(ctx, stop)
	code := Run(ctx, os.Args[1:], os.Getenv, os.Stdin, os.Stdout, os.Stderr, stores...)
	stop()
	os.Exit(code)
}

// quiet is a go-redis logger that prints nothing.
type quiet struct{}

func (quiet) Printf(context.Context, string, ...any) {}

// Exit statuses.
const (
	exitOK     = 0
	exitFailed = 1 // the command could not do what it was asked
	exitUsage  = 2 // it was asked wrongly: nothing was done
)

// Run is the whole command but for the process: args without the program
// name, env to read the environment (os.Getenv), the input (release's
// confirmation), the two outputs, and the stores it can reach (none: Redis
// alone). It returns the exit status. When ctx ends, watch returns 0 and
// the other commands stop waiting and fail.
func Run(ctx context.Context, args []string, env func(string) string, stdin io.Reader, stdout, stderr io.Writer, stores ...NewStore) int {
	if len(stores) == 0 {
		stores = []NewStore{Redis}
	}
	err := dispatch(ctx, args, stores, &invocation{env: env, stdin: stdin, stdout: stdout, stderr: stderr})
	var usage *usageError
	switch {
	case err == nil:
		return exitOK
	case errors.As(err, &usage):
		fmt.Fprintf(stderr, "redfence: %v\n", usage.msg)
		if usage.help != "" {
			fmt.Fprintf(stderr, "Run 'redfence help %s' for usage.\n", usage.help)
		} else {
			fmt.Fprintln(stderr, "Run 'redfence help' for usage.")
		}
		return exitUsage
	default:
		fmt.Fprintf(stderr, "redfence: %v\n", err)
		return exitFailed
	}
}

// dispatch parses the global flags and the command name and runs the
// command.
func dispatch(ctx context.Context, args []string, stores []NewStore, inv *invocation) error {
	stdout := inv.stdout
	g := newGlobals(stores)
	fs := newFlagSet("redfence")
	g.register(fs)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return printUsage(stdout, stores, "")
		}
		return flagError("", err)
	}
	rest := fs.Args()
	if len(rest) == 0 {
		return usagef("", "no command given")
	}
	name, rest := rest[0], rest[1:]
	if name == "help" {
		if len(rest) > 1 {
			return usagef("", "help takes at most one command")
		}
		topic := ""
		if len(rest) == 1 {
			topic = rest[0]
		}
		return printUsage(stdout, stores, topic)
	}
	cmd := lookup(name)
	if cmd == nil {
		return unknownCommand(name)
	}
	fs = newFlagSet(cmd.name)
	g.register(fs)
	runCmd := cmd.setup(fs)
	pos, err := parseInterleaved(fs, rest)
	if errors.Is(err, flag.ErrHelp) {
		return printUsage(stdout, stores, cmd.name)
	}
	if err != nil {
		return flagError(cmd.name, err)
	}
	if len(pos) < cmd.minArgs || len(pos) > cmd.maxArgs {
		return usagef(cmd.name, "usage: redfence %s %s", cmd.name, cmd.synopsis)
	}
	if err := g.resolve(inv.env); err != nil {
		return err
	}
	inv.g = g
	return runCmd(ctx, inv, pos)
}

// flagError words a flag the parser refused.
func flagError(help string, err error) error { return usagef(help, "%v", err) }

// warn writes a warning beside the command's result.
func (inv *invocation) warn(msg string) { fmt.Fprintf(inv.stderr, "redfence: warning: %s\n", msg) }

// connect is inv.g.connect, warning on inv's stderr.
func (inv *invocation) connect(ctx context.Context) (*session, error) {
	return inv.g.connect(ctx, inv.warn)
}

// invocation is what every command runs with: the global flags resolved,
// the environment, the input and the outputs (stderr for warnings beside
// a result).
type invocation struct {
	g      globals
	env    func(string) string
	stdin  io.Reader
	stdout io.Writer
	stderr io.Writer
}

// usageError is a command asked wrongly; help names the command whose
// usage to point at ("" for the general one).
type usageError struct {
	msg  string
	help string
}

func (e *usageError) Error() string { return e.msg }

func usagef(help, format string, args ...any) error {
	return &usageError{msg: fmt.Sprintf(format, args...), help: help}
}

// Usagef is the error of a command asked wrongly, for a Store: the command
// prints it, points at the general usage and exits 2, having done nothing.
func Usagef(format string, args ...any) error { return usagef("", format, args...) }
