package election

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/redfence/redfence/internal/typednil"
	"github.com/redfence/redfence/mutex"
	"github.com/redfence/redfence/mutex/admin"
	"github.com/redfence/redfence/mutex/backend"
)

// KeyPrefix begins the lock key of every election: election "billing"
// holds the Locker's key "election:billing" (under the driver's prefix in
// the store), which admin.Inspect and the redfence command show.
const KeyPrefix = "election:"

// Election is one named election among the candidates that share a
// Locker's backend. It is safe for concurrent use; it owns no goroutine
// beyond those of its terms and observers, which end with them.
type Election struct {
	l    *mutex.Locker
	name string
	key  string              // the lock key, KeyPrefix + name; also the journal's key
	j    backend.TermJournal // nil: no journal, Observe polls
	adm  *admin.Admin        // reads the lock's holder for Leader
	cfg  config
	tel  *telemetry

	mu        sync.Mutex // a leaf
	campaigns map[*campaign]struct{}
	terms     map[*Term]struct{} // begun, not yet ended
}

// New returns the election name over l. Its terms are tokens of l's key
// KeyPrefix+name; when l's backend is a backend.TermJournal (one Redis
// deployment), terms are journaled and Observe reads the journal;
// otherwise (Redlock) Observe polls. Bad input (nil Locker, empty or too
// long name, timing options that break a rule, each error naming the
// rule) returns an error matching ErrInvalid; a Locker's own bad options
// are mutex.New's error.
//
// The timing rules are client-go's, with the Locker's clock drift margin:
//
//	lease - drift(lease) > renew deadline   a deposed leader stops before another leads
//	renew deadline > JitterFactor × retry   a leader tries to renew before it gives up
func New(l *mutex.Locker, name string, opts ...Option) (*Election, error) {
	if l == nil {
		return nil, invalid("nil Locker")
	}
	if name == "" || len(KeyPrefix+name) > mutex.MaxKeyLen {
		return nil, invalid("name must have 1 to %d bytes", mutex.MaxKeyLen-len(KeyPrefix))
	}
	cfg := newConfig(opts)
	if err := cfg.check(l); err != nil {
		return nil, err
	}
	e := &Election{l: l, name: name, key: KeyPrefix + name, cfg: cfg, campaigns: map[*campaign]struct{}{}, terms: map[*Term]struct{}{}}
	e.adm, _ = admin.New(l) // fails only for a nil Locker
	if b := l.Backend(); b != nil {
		e.j, _ = b.(backend.TermJournal)
	}
	if typednil.Is(e.j) {
		e.j = nil
	}
	e.tel = newTelemetry(cfg.tp, cfg.mp, name)
	return e, nil
}

// check applies the timing rules, naming the one that failed.
func (c *config) check(l *mutex.Locker) error {
	if c.err != nil {
		return c.err
	}
	switch {
	case c.lease < mutex.MinTTL || c.lease > mutex.MaxTTL:
		return invalid("lease %v is outside %v..%v", c.lease, mutex.MinTTL, mutex.MaxTTL)
	case c.renew <= 0:
		return invalid("renew deadline %v must be positive", c.renew)
	case c.retry <= 0:
		return invalid("retry period %v must be positive", c.retry)
	}
	c.lease = c.lease.Truncate(time.Millisecond) // as the Locker takes it
	drift := l.ClockDrift(c.lease)
	if c.lease-drift <= c.renew {
		return invalid("rule lease - drift > renew deadline failed: lease %v - drift %v <= renew deadline %v", c.lease, drift, c.renew)
	}
	if float64(c.renew) <= JitterFactor*float64(c.retry) {
		return invalid("rule renew deadline > %v × retry period failed: %v <= %v × %v", JitterFactor, c.renew, JitterFactor, c.retry)
	}
	return nil
}

// Name returns the election's name.
func (e *Election) Name() string { return e.name }

// Key returns the election's lock key in its Locker (KeyPrefix + name).
func (e *Election) Key() string { return e.key }

// Leader is a term as seen from anywhere: the leader's value, the term
// (the lock's fencing token) and when it began.
type Leader struct {
	Value string
	Term  int64
	Since time.Time
}

// Leader returns who leads now. It reads the lock's holder (admin.Inspect)
// and, with a journal, the last term: a holder whose term has not begun
// (lock-delay) or that resigned is not a leader. Nobody leading returns
// ErrNoLeader; a backend without inspection an error matching
// errors.ErrUnsupported. Since is the term's start (journal) or the lock's
// acquisition (by the server's clock) without a journal.
func (e *Election) Leader(ctx context.Context) (Leader, error) {
	if e == nil || ctx == nil {
		return Leader{}, invalid("nil Election or context")
	}
	info, err := e.adm.Inspect(ctx, e.key)
	if err != nil {
		return Leader{}, err
	}
	if info.State != admin.Held {
		return Leader{}, ErrNoLeader
	}
	value, _ := parseOwner(info.Owner)
	ld := Leader{Value: value, Term: info.Token, Since: info.AcquiredAt}
	if e.j == nil {
		return ld, nil
	}
	last, ok, err := e.j.LastTerm(ctx, e.key)
	switch {
	case err != nil:
		return Leader{}, fmt.Errorf("election: reading the term journal: %w", err)
	case !ok:
		// No journal: it expired under a long term (24 h after its last
		// entry) or was lost; the holder leads, as inspection says.
		return ld, nil
	case last.Term != info.Token || last.Resigned:
		return Leader{}, ErrNoLeader
	}
	ld.Since = last.At
	return ld, nil
}

// ownerTag begins the owner id of an election's lock: a random part, so
// that no other acquisition re-enters it, the candidate's value, so that
// inspection from outside the process reads who leads, and the Locker's
// OwnerInfo (admin.OwnerID), so that it shows the leader's host and pid
// as it shows every other holder's.
const ownerTag = "election."

func (e *Election) newOwner(value string) string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return admin.OwnerID(e.l, ownerTag+hex.EncodeToString(b[:])+"."+value)
}

// parseOwner reads the value back from an owner id newOwner made, with
// the Locker's OwnerInfo or without it (a longest value's, or an older
// candidate's); ok is false for another id.
func parseOwner(owner string) (value string, ok bool) {
	owner, _, _ = admin.SplitOwnerID(owner)
	rest, ok := strings.CutPrefix(owner, ownerTag)
	if !ok || len(rest) < 25 || rest[24] != '.' {
		return "", false
	}
	return rest[25:], true
}

// checkCall checks a Campaign or Run call's input.
func (e *Election) checkCall(ctx context.Context, value string) error {
	switch {
	case e == nil:
		return invalid("nil Election")
	case ctx == nil:
		return invalid("nil context")
	case len(value) > MaxValueLen:
		return invalid("value of %d bytes exceeds %d", len(value), MaxValueLen)
	}
	return nil
}

// fatal says whether a failed acquisition should end a Campaign rather
// than be retried.
func fatal(ctx context.Context, err error) bool {
	return ctx.Err() != nil || errors.Is(err, mutex.ErrInvalid) || errors.Is(err, mutex.ErrClosed)
}
