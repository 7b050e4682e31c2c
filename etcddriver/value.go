package etcddriver

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// A lock key's value is owner NUL count NUL acquired (µs since the epoch, the
// acquiring client's clock). The owner comes first so that a transaction can
// compare it as a range of values (owner+NUL up to owner+\x01): owners and
// keys with a NUL byte are refused as bad input.

// holding is what a lock key holds.
type holding struct {
	owner    string
	count    int64
	acquired time.Time
}

func encode(h holding) string {
	return h.owner + "\x00" + strconv.FormatInt(h.count, 10) + "\x00" + strconv.FormatInt(h.acquired.UnixMicro(), 10)
}

func decode(v []byte) (holding, error) {
	parts := strings.Split(string(v), "\x00")
	if len(parts) != 3 {
		return holding{}, fmt.Errorf("etcddriver: a lock key's value has %d parts, not 3", len(parts))
	}
	n, err := strconv.ParseInt(parts[1], 10, 64)
	if err != nil || n < 1 {
		return holding{}, fmt.Errorf("etcddriver: a lock key's count %q", parts[1])
	}
	us, err := strconv.ParseInt(parts[2], 10, 64)
	if err != nil {
		return holding{}, fmt.Errorf("etcddriver: a lock key's acquired time %q", parts[2])
	}
	return holding{owner: parts[0], count: n, acquired: time.UnixMicro(us)}, nil
}

// ownedBy compares key's value with owner, and nothing else of it.
func ownedBy(key, owner string) []clientv3.Cmp {
	return valuePrefix(key, owner+"\x00")
}

// lastCount compares key's value with owner holding it once.
func lastCount(key, owner string) []clientv3.Cmp {
	return valuePrefix(key, owner+"\x001\x00")
}

// valuePrefix: key's value begins with p (p ends in NUL, and every value
// goes on after it).
func valuePrefix(key, p string) []clientv3.Cmp {
	hi := p[:len(p)-1] + "\x01"
	return []clientv3.Cmp{
		clientv3.Compare(clientv3.Value(key), ">", p),
		clientv3.Compare(clientv3.Value(key), "<", hi),
	}
}

// held compares key with the holding of owner under createRev.
func held(key, owner string, createRev int64) []clientv3.Cmp {
	return append(ownedBy(key, owner), clientv3.Compare(clientv3.CreateRevision(key), "=", createRev))
}

// auditPrefix is where key's forced releases are recorded, beside it: the
// NUL keeps the records out of every listing of lock keys.
func auditPrefix(key string) string { return key + "\x00audit\x00" }

func auditKey(key string, token int64) string {
	return fmt.Sprintf("%s%020d", auditPrefix(key), token)
}
