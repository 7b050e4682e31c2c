package redistest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redfence/redfence/internal/testutil"
)

// SentinelSet is a primary, one replica of it and one Sentinel (quorum 1)
// monitoring them as Name, all private to the test.
type SentinelSet struct {
	Name     string
	Servers  []*RedisServer // the primary first, as started; Failover swaps roles
	Sentinel *RedisServer
	t        testing.TB
}

// Sentinel starts a SentinelSet. Replication is asynchronous, as in
// production: a failover can lose writes the replica had not received yet.
func Sentinel(t testing.TB) *SentinelSet {
	t.Helper()
	primary := StartRedis(t)
	replica := StartRedis(t, WithRedisArgs("--replicaof", "127.0.0.1", strconv.Itoa(primary.Port())))
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		t.Fatalf("redistest: redis-server not found in PATH: %s", installRedis)
	}
	dir := t.TempDir()
	conf := filepath.Join(dir, "sentinel.conf")
	cfg := fmt.Sprintf("sentinel monitor mymaster 127.0.0.1 %d 1\n"+
		"sentinel down-after-milliseconds mymaster 1000\n"+
		"sentinel failover-timeout mymaster 3000\n", primary.Port())
	if err := os.WriteFile(conf, []byte(cfg), 0o644); err != nil {
		t.Fatalf("redistest: sentinel config: %v", err)
	}
	s := &RedisServer{t: t, bin: bin, dir: dir, conf: conf}
	t.Cleanup(s.stop)
	var lastErr error
	for range 5 {
		s.port = testutil.FreePort(t)
		if lastErr = s.start(); lastErr == nil {
			break
		}
	}
	if lastErr != nil {
		t.Fatalf("redistest: sentinel did not start: %v", lastErr)
	}
	set := &SentinelSet{Name: "mymaster", Servers: []*RedisServer{primary, replica}, Sentinel: s, t: t}
	// Wait until the replica is in sync, so the first failover has a
	// candidate.
	c := replica.Client()
	defer c.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		info, _ := c.Info(context.Background(), "replication").Result()
		if containsAll(info, "role:slave", "master_link_status:up") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("redistest: replica never synced:\n%s", info)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return set
}

func containsAll(s string, subs ...string) bool {
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			return false
		}
	}
	return true
}

// Client returns a Sentinel-aware client that follows the primary; the
// caller closes it.
func (s *SentinelSet) Client() *redis.Client {
	return redis.NewFailoverClient(&redis.FailoverOptions{
		MasterName:    s.Name,
		SentinelAddrs: []string{s.Sentinel.Addr()},
		DialTimeout:   200 * time.Millisecond,
		MaxRetries:    -1,
	})
}

// Primary returns the address Sentinel currently names as primary.
func (s *SentinelSet) Primary(ctx context.Context) (string, error) {
	c := redis.NewSentinelClient(&redis.Options{Addr: s.Sentinel.Addr()})
	defer c.Close()
	addr, err := c.GetMasterAddrByName(ctx, s.Name).Result()
	if err != nil {
		return "", err
	}
	return addr[0] + ":" + addr[1], nil
}

// Failover forces a failover (SENTINEL FAILOVER) and waits, up to within,
// until Sentinel names the other server as primary.
func (s *SentinelSet) Failover(ctx context.Context, within time.Duration) error {
	before, err := s.Primary(ctx)
	if err != nil {
		return err
	}
	c := redis.NewSentinelClient(&redis.Options{Addr: s.Sentinel.Addr()})
	defer c.Close()
	if err := c.Failover(ctx, s.Name).Err(); err != nil {
		return err
	}
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		if now, err := s.Primary(ctx); err == nil && now != before {
			return nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	return fmt.Errorf("testutil: Sentinel still names %s after %v", before, within)
}

// Server returns the handle of the server at addr (as Primary names it).
func (s *SentinelSet) Server(addr string) *RedisServer {
	for _, srv := range s.Servers {
		if srv.Addr() == addr {
			return srv
		}
	}
	return nil
}
