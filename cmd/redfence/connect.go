package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/redfence/redfence/mutex"
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

// conn is the Locker of a command and the servers under it.
type conn struct {
	locker  *mutex.Locker
	servers []server
}

// connect builds the Locker of the --redis URLs (dial), once each server
// named by a plain URL said it is a master outside a Cluster (probe); warn
// says what it could not check. The caller closes it.
func (g *globals) connect(ctx context.Context, warn func(string)) (*conn, error) {
	c, err := g.dial()
	if err != nil {
		return nil, err
	}
	if err := c.probe(ctx, g.timeout, warn); err != nil {
		c.close()
		return nil, err
	}
	return c, nil
}

// dial builds the Locker of the --redis URLs: over one deployment, or
// Redlock over three or more. It sends nothing. The caller closes it.
func (g *globals) dial() (*conn, error) {
	c := &conn{}
	for _, raw := range g.redis {
		s, err := dialURL(raw)
		if err != nil {
			c.close()
			return nil, err
		}
		c.servers = append(c.servers, s)
	}
	opts := []mutex.Option{mutex.WithPrefix(g.prefix), mutex.WithOwnerInfo(mutex.OwnerInfo{Service: "redfence-cli"})}
	if len(c.servers) == 1 {
		c.locker = mutex.New(c.servers[0].client, opts...)
	} else {
		clients := make([]redis.UniversalClient, len(c.servers))
		for i, s := range c.servers {
			if s.kind == cluster {
				c.close()
				return nil, usagef("", "--redis #%d is a Cluster: Redlock needs independent masters (servers or Sentinel masters)", i+1)
			}
			clients[i] = s.client
		}
		var err error
		if c.locker, err = mutex.NewRedlock(clients, opts...); err != nil {
			c.close()
			return nil, usagef("", "Redlock: %s", trimSentinel(err.Error(), mutex.ErrInvalid))
		}
	}
	if err := c.locker.Err(); err != nil {
		c.close()
		if errors.Is(err, mutex.ErrInvalid) {
			return nil, usagef("", "%s", trimSentinel(err.Error(), mutex.ErrInvalid))
		}
		return nil, err
	}
	return c, nil
}

// where names c's servers in messages.
func (c *conn) where() string {
	if c.redlock() {
		return "Redlock nodes " + c.addrs()
	}
	return c.servers[0].where()
}

// redlock reports whether c's Locker is a Redlock one.
func (c *conn) redlock() bool { return len(c.servers) > 1 }

// close closes the clients, then the Locker: a call still waiting on a
// hung server (an interrupted command's) then ends at once, and the
// Locker's Close, which waits for it, does not wait for the server.
func (c *conn) close() {
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
