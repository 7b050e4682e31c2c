package redisdriver

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redfence/redfence/mutex/backend"
	"github.com/redfence/redfence/redis/internal/redisproto"
)

// The term journal (backend.TermJournal) is a stream beside the lock key
// (redisproto.TermsOf, same Cluster slot) whose explicit entry ids,
// "<term>-1" for a start and "<term>-2" for a resignation, let Redis refuse
// a term not above the last one; XREAD BLOCK serves observers.
const (
	journalCap  = 1000           // entries kept, about (MAXLEN ~): at least the 100 the contract asks
	journalLife = 24 * time.Hour // after the last entry; without it, election reads the leader from inspection and applies the lock-delay
	journalRead = 100            // entries per read
)

var _ backend.TermJournal = (*Driver)(nil)

// AppendTerm records r's start, once, when r.Term is above every entry.
func (d *Driver) AppendTerm(ctx context.Context, key string, r backend.TermRecord) (bool, error) {
	if r.Term <= 0 {
		return false, invalid("term %d is not positive", r.Term)
	}
	return d.appendEntry(ctx, key, entryID(r.Term, 1),
		"v", r.Value, "o", r.Owner, "at", strconv.FormatInt(r.At.UnixMilli(), 10))
}

// ResignTerm records term's resignation while it is the newest entry's term.
func (d *Driver) ResignTerm(ctx context.Context, key string, term int64, at time.Time) (bool, error) {
	if term <= 0 {
		return false, invalid("term %d is not positive", term)
	}
	return d.appendEntry(ctx, key, entryID(term, 2), "r", "1", "at", strconv.FormatInt(at.UnixMilli(), 10))
}

func (d *Driver) appendEntry(ctx context.Context, key, id string, fields ...any) (bool, error) {
	lk, err := d.lockKey(key)
	if err != nil {
		return false, err
	}
	args := append([]any{id, journalCap, journalLife.Milliseconds()}, fields...)
	var n int64
	pending, err := d.run.Call(ctx, func(ctx context.Context) error {
		var err error
		n, err = redisproto.TermAppendScript.Run(ctx, d.client, []string{redisproto.TermsOf(lk)}, args...).Int64()
		return err
	})
	if err != nil || pending != nil {
		return false, err
	}
	return n == 1, nil
}

// Terms reads the entries above after's resignation id, waiting up to wait
// (XREAD BLOCK) when there are none.
func (d *Driver) Terms(ctx context.Context, key string, after int64, wait time.Duration) ([]backend.TermRecord, error) {
	lk, err := d.lockKey(key)
	if err != nil {
		return nil, err
	}
	block := time.Duration(-1) // go-redis: no BLOCK
	if wait > 0 {
		block = max(wait, time.Millisecond)
	}
	var got []redis.XStream
	pending, err := d.run.Interruptible(ctx, func(ctx context.Context) error {
		var err error
		got, err = d.client.XRead(ctx, &redis.XReadArgs{
			Streams: []string{redisproto.TermsOf(lk), entryID(after, 2)}, Count: journalRead, Block: block,
		}).Result()
		if errors.Is(err, redis.Nil) {
			err = nil
		}
		return err
	})
	if err != nil || pending != nil {
		return nil, err
	}
	var msgs []redis.XMessage
	for _, s := range got {
		msgs = append(msgs, s.Messages...)
	}
	return records(msgs)
}

// LastTerm reads the last two entries: a start and its resignation.
func (d *Driver) LastTerm(ctx context.Context, key string) (backend.TermRecord, bool, error) {
	lk, err := d.lockKey(key)
	if err != nil {
		return backend.TermRecord{}, false, err
	}
	var msgs []redis.XMessage
	pending, err := d.run.Call(ctx, func(ctx context.Context) error {
		var err error
		msgs, err = d.client.XRevRangeN(ctx, redisproto.TermsOf(lk), "+", "-", 2).Result()
		return err
	})
	if err != nil || pending != nil {
		return backend.TermRecord{}, false, err
	}
	for i, j := 0, len(msgs)-1; i < j; i, j = i+1, j-1 {
		msgs[i], msgs[j] = msgs[j], msgs[i]
	}
	recs, err := records(msgs)
	if err != nil || len(recs) == 0 {
		return backend.TermRecord{}, false, err
	}
	return recs[len(recs)-1], true, nil
}

func entryID(term int64, seq int) string {
	return strconv.FormatInt(term, 10) + "-" + strconv.Itoa(seq)
}

// records turns entries, oldest first, into records: a resignation folds
// into its start when both are there.
func records(msgs []redis.XMessage) ([]backend.TermRecord, error) {
	out := make([]backend.TermRecord, 0, len(msgs))
	for _, m := range msgs {
		r, seq, err := record(m)
		if err != nil {
			return nil, err
		}
		if seq == 2 && len(out) > 0 && out[len(out)-1].Term == r.Term {
			out[len(out)-1].Resigned = true
			continue
		}
		out = append(out, r)
	}
	return out, nil
}

func record(m redis.XMessage) (backend.TermRecord, int, error) {
	ts, ss, ok := strings.Cut(m.ID, "-")
	term, err1 := strconv.ParseInt(ts, 10, 64)
	seq, err2 := strconv.Atoi(ss)
	if !ok || err1 != nil || err2 != nil || (seq != 1 && seq != 2) {
		return backend.TermRecord{}, 0, fmt.Errorf("redisdriver: term journal entry %q is not a term's", m.ID)
	}
	r := backend.TermRecord{Term: term, Resigned: seq == 2}
	r.Value, _ = m.Values["v"].(string)
	r.Owner, _ = m.Values["o"].(string)
	if at, _ := m.Values["at"].(string); at != "" {
		if ms, err := strconv.ParseInt(at, 10, 64); err == nil {
			r.At = time.UnixMilli(ms)
		}
	}
	return r, seq, nil
}
