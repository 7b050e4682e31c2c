package etcddriver

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/redfence/redfence/mutex/backend"
)

// The term journal (backend.TermJournal, package election) lives beside
// the lock key: the newest term at key+termsSuffix, and one key a record
// under key+termSuffix, named by the term in fixed-width hex (key order is
// term order) and "/1" for a start, "/2" for a resignation. Each append is
// a transaction that compares the newest term, so a term not above it is
// refused; readers range from a term on and watch from the revision they
// read. The NUL byte keeps these keys out of List. Records live on a kept
// lease of journalLife: without a journal, election reads the leader from
// inspection and applies the lock-delay.
const (
	termsSuffix = "\x00terms"
	termSuffix  = "\x00term/"
	journalLife = 24 * time.Hour
	journalRead = 100 // records per read
)

var _ backend.TermJournal = (*Driver)(nil)

type termValue struct {
	Value string `json:"v,omitempty"`
	Owner string `json:"o,omitempty"`
	At    int64  `json:"at"` // ms
}

func termName(term int64) string { return fmt.Sprintf("%016x", uint64(term)) }

// AppendTerm records r's start when r.Term is above the newest term.
func (b *Driver) AppendTerm(ctx context.Context, key string, r backend.TermRecord) (bool, error) {
	if err := b.check(key, "", false); err != nil {
		return false, err
	}
	if r.Term <= 0 {
		return false, invalid("term %d is not positive", r.Term)
	}
	key = b.name(key)
	v, _ := json.Marshal(termValue{Value: r.Value, Owner: r.Owner, At: r.At.UnixMilli()})
	name, newest := termName(r.Term), key+termsSuffix
	var ok bool
	err := b.withKept(ctx, journalLife, func(keep lease) error {
		puts := []clientv3.Op{
			clientv3.OpPut(newest, name, clientv3.WithLease(keep.id)),
			clientv3.OpPut(key+termSuffix+name+"/1", string(v), clientv3.WithLease(keep.id)),
		}
		// No newest term yet, or a lower one: etcd's conditions are and-ed,
		// so the second case is a transaction within the first's else.
		resp, err := b.c.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(newest), "=", 0)).
			Then(puts...).
			Else(clientv3.OpTxn([]clientv3.Cmp{clientv3.Compare(clientv3.Value(newest), "<", name)}, puts, nil)).
			Commit()
		if err != nil {
			return err
		}
		ok = resp.Succeeded || resp.Responses[0].GetResponseTxn().Succeeded
		return nil
	})
	if err != nil {
		return false, fmt.Errorf("etcddriver: append term %d of %q: %w", r.Term, key, err)
	}
	return ok, nil
}

// ResignTerm records term's resignation while it is the newest term.
func (b *Driver) ResignTerm(ctx context.Context, key string, term int64, at time.Time) (bool, error) {
	if err := b.check(key, "", false); err != nil {
		return false, err
	}
	if term <= 0 {
		return false, invalid("term %d is not positive", term)
	}
	key = b.name(key)
	v, _ := json.Marshal(termValue{At: at.UnixMilli()})
	name := termName(term)
	var ok bool
	err := b.withKept(ctx, journalLife, func(keep lease) error {
		resp, err := b.c.Txn(ctx).If(clientv3.Compare(clientv3.Value(key+termsSuffix), "=", name)).
			Then(clientv3.OpPut(key+termSuffix+name+"/2", string(v), clientv3.WithLease(keep.id))).
			Commit()
		if err != nil {
			return err
		}
		ok = resp.Succeeded
		return nil
	})
	if err != nil {
		return false, fmt.Errorf("etcddriver: resign term %d of %q: %w", term, key, err)
	}
	return ok, nil
}

// Terms reads the records above after; with none, it watches for one from
// the revision it read, up to wait.
func (b *Driver) Terms(ctx context.Context, key string, after int64, wait time.Duration) ([]backend.TermRecord, error) {
	if err := b.check(key, "", false); err != nil {
		return nil, err
	}
	key = b.name(key)
	prefix := key + termSuffix
	from := prefix + termName(after) + "/3" // after every record of term after
	for {
		r, err := b.c.Get(ctx, from, clientv3.WithRange(clientv3.GetPrefixRangeEnd(prefix)), clientv3.WithLimit(journalRead))
		if err != nil {
			return nil, fmt.Errorf("etcddriver: read terms of %q: %w", key, err)
		}
		if len(r.Kvs) > 0 || wait <= 0 {
			return records(prefix, r.Kvs)
		}
		if !b.awaitPut(ctx, from, prefix, r.Header.Revision+1, wait) {
			return nil, ctx.Err() // nil: none came within wait
		}
		wait = 0 // one more read, which finds what the watch saw
	}
}

// awaitPut watches [from, the prefix's end) from rev for up to wait; true
// when something was put.
func (b *Driver) awaitPut(ctx context.Context, from, prefix string, rev int64, wait time.Duration) bool {
	wctx, cancel := context.WithTimeout(clientv3.WithRequireLeader(ctx), wait)
	defer cancel()
	for wr := range b.c.Watch(wctx, from, clientv3.WithRange(clientv3.GetPrefixRangeEnd(prefix)), clientv3.WithRev(rev)) {
		for _, ev := range wr.Events {
			if ev.Type == mvccpb.PUT {
				return true
			}
		}
		if wr.Err() != nil {
			return false
		}
	}
	return false
}

// LastTerm reads the last two records: a start and its resignation.
func (b *Driver) LastTerm(ctx context.Context, key string) (backend.TermRecord, bool, error) {
	if err := b.check(key, "", false); err != nil {
		return backend.TermRecord{}, false, err
	}
	key = b.name(key)
	prefix := key + termSuffix
	r, err := b.c.Get(ctx, prefix, clientv3.WithPrefix(), clientv3.WithLimit(2),
		clientv3.WithSort(clientv3.SortByKey, clientv3.SortDescend))
	if err != nil {
		return backend.TermRecord{}, false, fmt.Errorf("etcddriver: read the last term of %q: %w", key, err)
	}
	kvs := r.Kvs
	if len(kvs) == 2 {
		kvs = []*mvccpb.KeyValue{kvs[1], kvs[0]}
	}
	recs, err := records(prefix, kvs)
	if err != nil || len(recs) == 0 {
		return backend.TermRecord{}, false, err
	}
	return recs[len(recs)-1], true, nil
}

// records turns keys under prefix, in key order, into records: a
// resignation folds into its start when both are there.
func records(prefix string, kvs []*mvccpb.KeyValue) ([]backend.TermRecord, error) {
	out := make([]backend.TermRecord, 0, len(kvs))
	for _, kv := range kvs {
		name, seq, ok := strings.Cut(strings.TrimPrefix(string(kv.Key), prefix), "/")
		term, err := strconv.ParseUint(name, 16, 63)
		var v termValue
		if !ok || err != nil || (seq != "1" && seq != "2") || json.Unmarshal(kv.Value, &v) != nil {
			return nil, fmt.Errorf("etcddriver: %q is not a term's record", kv.Key)
		}
		r := backend.TermRecord{Term: int64(term), Value: v.Value, Owner: v.Owner, At: time.UnixMilli(v.At), Resigned: seq == "2"}
		if r.Resigned && len(out) > 0 && out[len(out)-1].Term == r.Term {
			out[len(out)-1].Resigned = true
			continue
		}
		out = append(out, r)
	}
	return out, nil
}
