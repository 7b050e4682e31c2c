package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/redfence/redfence/mutex"
	"github.com/redfence/redfence/mutex/admin"
)

// defaultPrefix is --prefix's default, the drivers'.
const defaultPrefix = "redfence:"

// globals are the flags every command takes, before or after its name:
// the common ones and each store's.
type globals struct {
	prefix  string
	timeout time.Duration
	stores  []Store
	store   Store // the one the flags or the environment name (resolve)
}

// newGlobals returns the global flags' defaults, with a Store of each kind
// whose flags are unset.
func newGlobals(stores []NewStore) globals {
	g := globals{prefix: defaultPrefix, timeout: 10 * time.Second}
	for _, s := range stores {
		g.stores = append(g.stores, s())
	}
	return g
}

// register declares the global flags on fs, with g's values as defaults.
// Both the command line's head and each command's own flag set declare
// them, on the same variables: what the head set stays set.
func (g *globals) register(fs *flag.FlagSet) {
	fs.StringVar(&g.prefix, "prefix", g.prefix, "key `prefix` of the Lockers to look at, as the driver's WithPrefix")
	fs.DurationVar(&g.timeout, "timeout", g.timeout, "time `D` each call to the servers may take (for a listing, each page)")
	for _, s := range g.stores {
		s.Flags(fs)
	}
}

// resolve picks the store the flags name, else the one the environment
// names, else the first; fills in its defaults from the environment; and
// checks what the flags cannot.
func (g *globals) resolve(env func(string) string) error {
	var byFlag, byEnv []Store
	for _, s := range g.stores {
		f, e := s.Named(env)
		if f {
			byFlag = append(byFlag, s)
		}
		if e {
			byEnv = append(byEnv, s)
		}
	}
	switch {
	case len(byFlag) > 1:
		return usagef("", "flags name servers of two stores: give the flags of one")
	case len(byFlag) == 1:
		g.store = byFlag[0]
	case len(byEnv) > 1:
		return usagef("", "the environment names servers of two stores: give the flag of the one to use")
	case len(byEnv) == 1:
		g.store = byEnv[0]
	default:
		g.store = g.stores[0]
	}
	if err := g.store.Resolve(env); err != nil {
		return err
	}
	if g.timeout <= 0 {
		return usagef("", "--timeout must be positive, got %v", g.timeout)
	}
	return nil
}

// connect builds the Locker of the store's servers (dial), once they said
// they are servers the command can look through (probe); warn says what
// could not be checked. The caller closes it.
func (g *globals) connect(ctx context.Context, warn func(string)) (*session, error) {
	c, err := g.dial()
	if err != nil {
		return nil, err
	}
	if err := c.Probe(ctx, g.timeout, warn); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// dial builds the Locker of the store's servers, sending nothing. The
// command's Locker announces itself as service "redfence-cli".
func (g *globals) dial() (*session, error) {
	c, err := g.store.Dial(g.prefix, mutex.WithOwnerInfo(mutex.OwnerInfo{Service: "redfence-cli"}))
	if err != nil {
		return nil, err
	}
	a, err := admin.New(c.Locker())
	if err != nil {
		c.Close()
		return nil, err
	}
	return &session{Conn: c, admin: a}, nil
}

// session is a command's Conn and the operator's calls over its Locker.
type session struct {
	Conn
	admin *admin.Admin
}

// urlList is a repeatable string flag.
type urlList []string

func (l *urlList) String() string { return strings.Join(*l, " ") }

func (l *urlList) Set(s string) error {
	if s == "" {
		return errors.New("empty URL")
	}
	*l = append(*l, s)
	return nil
}

// newFlagSet returns a flag set that reports its errors to its caller
// only: run words them.
func newFlagSet(name string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	return fs
}

// parseInterleaved parses flags and positional arguments in any order
// ("release KEY --force" and "release --force KEY"); after "--" everything
// is positional.
func parseInterleaved(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return pos, nil
		}
		if n := len(args) - len(rest); n > 0 && args[n-1] == "--" {
			return append(pos, rest...), nil
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}

// flagDefaults is fs's flags as usage prints them, each with two dashes.
func flagDefaults(fs *flag.FlagSet) string {
	var b strings.Builder
	fs.VisitAll(func(f *flag.Flag) {
		name, usage := flag.UnquoteUsage(f)
		fmt.Fprintf(&b, "  --%s", f.Name)
		if name != "" {
			fmt.Fprintf(&b, " %s", name)
		}
		b.WriteString("\n    \t")
		b.WriteString(strings.ReplaceAll(usage, "\n", "\n    \t"))
		if f.DefValue != "" && f.DefValue != "false" && f.DefValue != "0" && !strings.Contains(usage, "(default") {
			if v, ok := f.Value.(flag.Getter); ok && isString(v.Get()) {
				fmt.Fprintf(&b, " (default %q)", f.DefValue)
			} else {
				fmt.Fprintf(&b, " (default %s)", f.DefValue)
			}
		}
		b.WriteByte('\n')
	})
	return b.String()
}

func isString(v any) bool {
	_, ok := v.(string)
	return ok
}
