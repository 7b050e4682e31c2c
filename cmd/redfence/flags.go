package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"
)

// defaultRedisURL is the Redis of --redis when neither the flag nor
// REDIS_URL names one.
const defaultRedisURL = "redis://127.0.0.1:6379"

// globals are the flags every command takes, before or after its name.
type globals struct {
	redis   urlList
	prefix  string
	timeout time.Duration
}

// newGlobals returns the global flags' defaults.
func newGlobals() globals {
	return globals{prefix: "redfence:", timeout: 10 * time.Second}
}

// register declares the global flags on fs, with g's values as defaults.
// Both the command line's head and each command's own flag set declare
// them, on the same variables: what the head set stays set.
func (g *globals) register(fs *flag.FlagSet) {
	fs.Var(&g.redis, "redis", "Redis `URL`; repeat it 3 or more times for Redlock nodes (default $REDIS_URL, else "+defaultRedisURL+")")
	fs.StringVar(&g.prefix, "prefix", g.prefix, "key `prefix` of the Lockers to look at, as mutex.WithPrefix")
	fs.DurationVar(&g.timeout, "timeout", g.timeout, "time `D` each call to the servers may take (for a listing, each page)")
}

// resolve fills in the defaults that come from the environment and checks
// what the flags cannot.
func (g *globals) resolve(env func(string) string) error {
	if len(g.redis) == 0 {
		u := env("REDIS_URL")
		if u == "" {
			u = defaultRedisURL
		}
		g.redis = urlList{u}
	}
	if len(g.redis) == 2 {
		return usagef("", "two --redis URLs: give one (a server, Sentinel or Cluster) or three or more independent masters for Redlock, whose majority needs at least three")
	}
	if g.timeout <= 0 {
		return usagef("", "--timeout must be positive, got %v", g.timeout)
	}
	return nil
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
