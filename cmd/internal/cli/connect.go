package cli

import (
	"cmp"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/redfence/redfence/mutex"
	"github.com/redfence/redfence/mutex/backend"
	"github.com/redfence/redfence/redis/redisdriver"
	"github.com/redfence/redfence/redis/redlockdriver"
)

// server is one --redis URL made into a client.
type server struct {
	client redis.UniversalClient
	kind   kind
	addrs  []string // the server, the sentinels or the Cluster's seed nodes
	master string   // Sentinel's master name
}

type kind int

const (
	standalone kind = iota
	sentinel
	cluster
)

// where names s in messages: never with its credentials.
func (s server) where() string {
	switch s.kind {
	case sentinel:
		return fmt.Sprintf("Sentinel at %s (master %s)", strings.Join(s.addrs, ", "), s.master)
	case cluster:
		return "Redis Cluster at " + strings.Join(s.addrs, ", ")
	}
	return "Redis at " + s.addrs[0]
}

// dialURL makes a client of one --redis URL: standalone (redis:// or
// rediss://), Sentinel (a master_name parameter; the host is a sentinel)
// or Cluster (cluster=true, or addr parameters naming more nodes). The
// client honours the caller's ctx deadlines on its sockets. It connects
// lazily: a bad address shows at the first command.
func dialURL(raw string) (server, error) {
	u, err := url.Parse(raw)
	if err != nil {
		// Neither the URL nor the parser's words are echoed: either may hold
		// a piece of a password.
		return server{}, usagef("", "--redis: not a valid URL (percent-encode any / # ? @ in the password)")
	}
	shown := redacted(u) // as given, without its passwords
	if u.Scheme != "redis" && u.Scheme != "rediss" {
		return server{}, usagef("", "--redis %s: the scheme must be redis:// or rediss://", shown)
	}
	q := u.Query()
	// A refused dial is an answer: report it at once, unless the URL asks
	// for retries.
	dialerRetries := 0
	if !q.Has("dialer_retries") {
		dialerRetries = 1
	}
	clusterParam, clusterSet := false, q.Has("cluster")
	if clusterSet {
		v := q.Get("cluster")
		if clusterParam, err = strconv.ParseBool(v); err != nil {
			return server{}, usagef("", "--redis %s: cluster=%q is neither true nor false", shown, v)
		}
		q.Del("cluster")
		u.RawQuery = q.Encode()
	}
	switch {
	case q.Has("master_name"):
		if clusterParam {
			return server{}, usagef("", "--redis %s: master_name (Sentinel) and cluster=true exclude each other", shown)
		}
		o, err := redis.ParseFailoverURL(u.String())
		if err != nil {
			return server{}, usagef("", "--redis %s: %v", shown, err)
		}
		o.ContextTimeoutEnabled = true
		o.DialerRetries = cmp.Or(dialerRetries, o.DialerRetries)
		return server{client: redis.NewFailoverClient(o), kind: sentinel, addrs: o.SentinelAddrs, master: o.MasterName}, nil
	case clusterParam || q.Has("addr"):
		if clusterSet && !clusterParam {
			return server{}, usagef("", "--redis %s: addr parameters name Cluster nodes: drop cluster=false", shown)
		}
		o, err := redis.ParseClusterURL(u.String())
		if err != nil {
			return server{}, usagef("", "--redis %s: %v", shown, err)
		}
		o.ContextTimeoutEnabled = true
		o.DialerRetries = cmp.Or(dialerRetries, o.DialerRetries)
		return server{client: redis.NewClusterClient(o), kind: cluster, addrs: o.Addrs}, nil
	default:
		o, err := redis.ParseURL(u.String())
		if err != nil {
			return server{}, usagef("", "--redis %s: %v", shown, err)
		}
		o.ContextTimeoutEnabled = true
		o.DialerRetries = cmp.Or(dialerRetries, o.DialerRetries)
		return server{client: redis.NewClient(o), kind: standalone, addrs: []string{o.Addr}}, nil
	}
}

// defaultRedisURL is the Redis of --redis when neither the flag nor
// REDIS_URL names one.
const defaultRedisURL = "redis://127.0.0.1:6379"

// Redis is the Store of --redis URLs: one deployment (a server, Sentinel
// or Cluster), or three or more independent masters for Redlock.
func Redis() Store { return &redisStore{} }

type redisStore struct {
	urls urlList
}

func (s *redisStore) Flags(fs *flag.FlagSet) {
	fs.Var(&s.urls, "redis", "Redis `URL`; repeat it 3 or more times for Redlock nodes (default $REDIS_URL, else "+defaultRedisURL+")")
}

func (s *redisStore) Named(env func(string) string) (byFlag, byEnv bool) {
	return len(s.urls) > 0, env("REDIS_URL") != ""
}

func (s *redisStore) Resolve(env func(string) string) error {
	if len(s.urls) == 0 {
		s.urls = urlList{cmp.Or(env("REDIS_URL"), defaultRedisURL)}
	}
	if len(s.urls) == 2 {
		return usagef("", "two --redis URLs: give one (a server, Sentinel or Cluster) or three or more independent masters for Redlock, whose majority needs at least three")
	}
	return nil
}

func (s *redisStore) Usage() string {
	return `Redis URLs (--redis, else $REDIS_URL):
  redis://[user:pass@]host:port[/db]      one server (rediss:// for TLS)
  redis://host:port?master_name=NAME      Sentinel: host:port is a sentinel
  redis://host:port?cluster=true          Cluster: host:port is a node; addr=host:port
                                          parameters name more nodes (and mean Cluster)
  --redis three or more times             Redlock: independent masters, quorum N/2+1
`
}

// Dial builds the Locker of the --redis URLs: a redisdriver over one
// deployment, or a redlockdriver over three or more, its keys under
// prefix. It sends nothing. The caller closes it.
func (s *redisStore) Dial(prefix string, opts ...mutex.Option) (Conn, error) {
	c := &conn{}
	for _, raw := range s.urls {
		srv, err := dialURL(raw)
		if err != nil {
			c.Close()
			return nil, err
		}
		c.servers = append(c.servers, srv)
	}
	b, err := c.driver(prefix)
	if err == nil {
		if c.locker, err = mutex.New(b, opts...); err != nil {
			_ = b.Close()
		}
	}
	if err != nil {
		c.Close()
		if errors.Is(err, mutex.ErrInvalid) {
			return nil, usagef("", "%s", trimInvalid(err.Error()))
		}
		return nil, err
	}
	return c, nil
}

// driver is the backend over c's servers: redisdriver over one
// deployment, redlockdriver over independent masters.
func (c *conn) driver(prefix string) (closingBackend, error) {
	if len(c.servers) == 1 {
		return redisdriver.New(c.servers[0].client, redisdriver.WithPrefix(prefix))
	}
	clients := make([]redis.UniversalClient, len(c.servers))
	for i, srv := range c.servers {
		if srv.kind == cluster {
			return nil, usagef("", "--redis #%d is a Cluster: Redlock needs independent masters (servers or Sentinel masters)", i+1)
		}
		clients[i] = srv.client
	}
	d, err := redlockdriver.New(clients, redlockdriver.WithPrefix(prefix))
	if err != nil {
		return nil, usagef("", "Redlock: %s", trimInvalid(err.Error()))
	}
	return d, nil
}

// closingBackend is a driver: the Locker built over it closes it.
type closingBackend interface {
	backend.Backend
	io.Closer
}

// conn is the Locker of a command and the Redis servers under it.
type conn struct {
	locker  *mutex.Locker
	servers []server
}

func (c *conn) Locker() *mutex.Locker { return c.locker }

// Where names c's servers in messages.
func (c *conn) Where() string {
	if c.redlock() {
		return "Redlock nodes " + c.addrs()
	}
	return c.servers[0].where()
}

func (c *conn) Traits() Traits {
	if c.redlock() {
		return Traits{Store: "Redis", Nodes: len(c.servers), NoQueue: "Redlock keeps no queue"}
	}
	return Traits{Store: "Redis", Nodes: 1}
}

// redlock reports whether c's Locker is a Redlock one.
func (c *conn) redlock() bool { return len(c.servers) > 1 }

// Close closes the clients, then the Locker (and with it the driver): a
// call still waiting on a hung server (an interrupted command's) then ends
// at once, and the Locker's Close, which waits for it, does not wait for
// the server.
func (c *conn) Close() {
	for _, s := range c.servers {
		_ = s.client.Close()
	}
	if c.locker != nil {
		_ = c.locker.Close()
	}
}

// redacted is u as it may be shown: the userinfo's password and the
// password query parameters (Sentinel's, the master's) masked.
func redacted(u *url.URL) string {
	c := *u
	q := c.Query()
	masked := false
	for _, k := range []string{"password", "sentinel_password"} {
		if q.Has(k) {
			q.Set(k, "xxxxx")
			masked = true
		}
	}
	if masked { // (Encode reorders the parameters: only when it must)
		c.RawQuery = q.Encode()
	}
	return c.Redacted()
}
