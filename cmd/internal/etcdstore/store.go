package etcdstore

import (
	"errors"
	"flag"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/redfence/redfence/cmd/internal/cli"
	etcddriver "github.com/redfence/redfence/etcddriver"
	"github.com/redfence/redfence/mutex"
)

// Etcd is the Store of --etcd URLs: the members of one etcd cluster whose
// locks etcddriver Drivers hold.
func Etcd() cli.Store { return &store{} }

type store struct {
	urls    []string // as given, split at commas
	base    int64    // --etcd-token-base
	baseSet bool
	members []member // Resolve's
}

// member is one --etcd URL: the endpoint the client dials and the address
// messages name.
type member struct {
	endpoint string // scheme://host:port
	addr     string // host:port
}

func (s *store) Flags(fs *flag.FlagSet) {
	fs.Func("etcd", "etcd member `URL` (http:// or https://); repeat it, or separate with commas, for more members of one cluster (default $ETCD_ENDPOINTS)", func(v string) error {
		for u := range strings.SplitSeq(v, ",") {
			if u = strings.TrimSpace(u); u == "" {
				return errors.New("empty URL")
			}
			s.urls = append(s.urls, u)
		}
		return nil
	})
	fs.Func("etcd-token-base", "the etcddriver.WithTokenBase `N` of the Lockers to look at (default 0)", func(v string) error {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			return errors.New("not a token base: a whole number, 0 or more")
		}
		s.base, s.baseSet = n, true
		return nil
	})
}

func (s *store) Named(env func(string) string) (byFlag, byEnv bool) {
	return len(s.urls) > 0 || s.baseSet, env("ETCD_ENDPOINTS") != ""
}

func (s *store) Resolve(env func(string) string) error {
	if len(s.urls) == 0 {
		for u := range strings.SplitSeq(env("ETCD_ENDPOINTS"), ",") {
			if u = strings.TrimSpace(u); u != "" {
				s.urls = append(s.urls, u)
			}
		}
	}
	if len(s.urls) == 0 {
		return cli.Usagef("no etcd member named: give --etcd URL or ETCD_ENDPOINTS")
	}
	for _, raw := range s.urls {
		m, err := parseMember(raw)
		if err != nil {
			return err
		}
		s.members = append(s.members, m)
	}
	return nil
}

// parseMember reads one --etcd URL; host:port alone means http://, as for
// etcdctl. One with credentials is refused: the command does not log in to
// etcd, and would echo a password.
func parseMember(raw string) (member, error) {
	if !strings.Contains(raw, "://") {
		raw = "http://" + raw
	}
	u, err := url.Parse(raw)
	switch {
	case err != nil || u.Host == "" || u.Opaque != "":
		return member{}, cli.Usagef("--etcd %q: not a member URL such as http://127.0.0.1:2379", redact(raw))
	case u.User != nil:
		return member{}, cli.Usagef("--etcd %s: the command does not log in to etcd; give a URL without user:password", u.Redacted())
	case u.Scheme != "http" && u.Scheme != "https":
		return member{}, cli.Usagef("--etcd %s: the scheme must be http:// or https://", u.Redacted())
	case u.Path != "" && u.Path != "/" || u.RawQuery != "" || u.Fragment != "":
		return member{}, cli.Usagef("--etcd %s: a member URL has no path, query or fragment", u.Redacted())
	case u.Port() == "":
		return member{}, cli.Usagef("--etcd %s: the URL needs a port (etcd's client port is usually 2379)", u.Redacted())
	}
	return member{endpoint: u.Scheme + "://" + u.Host, addr: u.Host}, nil
}

// redact is raw without what may follow a user name: a URL that did not
// parse is shown up to its host.
func redact(raw string) string {
	if i := strings.LastIndexByte(raw, '@'); i >= 0 {
		return "xxxxx@" + raw[i+1:]
	}
	return raw
}

func (s *store) Usage() string {
	return `etcd URLs (--etcd, else $ETCD_ENDPOINTS, comma-separated):
  http://host:port (or host:port)         a member of the cluster (https:// for TLS)
  --etcd more times, or URLs with commas  more members of the same cluster
`
}

// Dial builds a Locker over an etcddriver Driver, its keys under prefix,
// over a client of the members. It sends nothing: the client connects at
// its first call. A prefix the Driver refuses is a usage error.
func (s *store) Dial(prefix string, opts ...mutex.Option) (cli.Conn, error) {
	eps := make([]string, len(s.members))
	for i, m := range s.members {
		eps[i] = m.endpoint
	}
	c, err := clientv3.New(clientv3.Config{Endpoints: eps, Logger: zap.NewNop()})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", s.where(), err)
	}
	l, err := locker(c, prefix, s.base, opts)
	if err != nil {
		_ = c.Close()
		if errors.Is(err, mutex.ErrInvalid) {
			_, detail, _ := strings.Cut(err.Error(), "invalid argument: ")
			return nil, cli.Usagef("%s", detail)
		}
		return nil, err
	}
	return &conn{client: c, locker: l, store: s}, nil
}

// locker is the Locker over an etcddriver Driver on c; the Locker owns the
// Driver and closes it.
func locker(c *clientv3.Client, prefix string, base int64, opts []mutex.Option) (*mutex.Locker, error) {
	d, err := etcddriver.New(c, etcddriver.WithPrefix(prefix), etcddriver.WithTokenBase(base))
	if err != nil {
		return nil, err
	}
	l, err := mutex.New(d, opts...)
	if err != nil {
		_ = d.Close()
		return nil, err
	}
	return l, nil
}

// where names the members in messages.
func (s *store) where() string {
	addrs := make([]string, len(s.members))
	for i, m := range s.members {
		addrs[i] = m.addr
	}
	return "etcd at " + strings.Join(addrs, ", ")
}

// conn is the Locker of a command and the etcd client under it.
type conn struct {
	client *clientv3.Client
	locker *mutex.Locker // owns the etcddriver Driver
	store  *store
}

func (c *conn) Locker() *mutex.Locker { return c.locker }

func (c *conn) Where() string { return c.store.where() }

func (c *conn) Traits() cli.Traits {
	return cli.Traits{Store: "etcd", Nodes: 1, NoQueue: "etcd keeps no queue (each Locker queues its own waiters)"}
}

// Close closes the client first, so that a call still out (an
// interrupted command's) ends at once; then the Locker, which waits for
// it, and its Driver's watches.
func (c *conn) Close() {
	_ = c.client.Close()
	_ = c.locker.Close()
}

// Explain words a failed call: without a leader or a reachable member,
// etcd's client waits for one until the call's deadline.
func (c *conn) Explain(err error, elapsed time.Duration) error {
	where := c.Where()
	switch {
	case cli.IsTimeout(err):
		return fmt.Errorf("%s did not answer: gave up after %v (no member reachable, or no leader: fewer than a majority of members up)",
			where, elapsed.Round(10*time.Millisecond))
	case errors.Is(err, mutex.ErrUnavailable):
		return fmt.Errorf("%s failed: %s", where, cli.Plain(err, elapsed))
	}
	return fmt.Errorf("%s: %s", where, cli.Plain(err, elapsed))
}
