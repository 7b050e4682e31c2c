// Package lockview is how redfence's operator views, the redfence command
// and the lockdebug page, show locks: one JSON schema for both (Schema,
// documented by SchemaDoc), and keys and owner ids made visible for a
// terminal or a page.
package lockview

import (
	"cmp"
	"encoding/hex"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/redfence/redfence/mutex"
	"github.com/redfence/redfence/mutex/admin"
)

// Schema is the version of the JSON that both views write, in every
// document's "schema" field. Within a version, fields are only ever added.
const Schema = 2

// Lock is one key as its servers hold it: an element of a listing, and the
// head of an inspection.
type Lock struct {
	Key        string   `json:"key"`
	KeyHex     string   `json:"key_hex,omitempty"`
	RedisKey   string   `json:"redis_key"`
	State      string   `json:"state"`
	Token      int64    `json:"token"`
	Owner      string   `json:"owner"`
	OwnerInfo  *Owner   `json:"owner_info"`
	Count      int      `json:"count"`
	AcquiredAt Time     `json:"acquired_at"`
	RenewedAt  Time     `json:"renewed_at"`
	HeldMs     *Millis  `json:"held_ms"`
	LeaseMs    Millis   `json:"lease_ms"`
	Waited     bool     `json:"waited"`
	Waiters    []Waiter `json:"waiters"`
	// NoQueue, when the store keeps no queue of the Lockers waiting for a
	// key (Redlock, etcd), says so: Waiters is then empty without meaning
	// that no one waits.
	NoQueue    string `json:"no_queue,omitempty"`
	ServerTime Time   `json:"server_time"`
}

// Inspection is one key with its forced releases and, for Redlock, each
// node's view.
type Inspection struct {
	Schema int `json:"schema"`
	Lock
	Forced []Forced `json:"forced_releases"`
	Nodes  []Node   `json:"nodes,omitempty"`
	// Semaphore is nil, and absent from the JSON, both when the key has
	// none and when the store keeps none: absence claims nothing, so a
	// store that cannot be looked at is never shown as having none.
	Semaphore *Semaphore `json:"semaphore,omitempty"`
	// RWLock is the read-write lock of the key, nil and absent as
	// Semaphore is.
	RWLock *RWLock `json:"rwlock,omitempty"`
	// HeldAs is what holds the key: "lock" (held or reserved),
	// "semaphore" (a permit), "rwlock" (a read or the write); empty when
	// nothing does. State is the lock's alone.
	HeldAs []string `json:"held_as"`
}

// RWLock is the read-write lock of an inspected key: its writer or its
// readers (a reader's token is the last write's), the writers waiting, and
// the last write's token.
type RWLock struct {
	Writer    *Permit  `json:"writer"`
	Readers   []Permit `json:"readers"`
	Waiting   int      `json:"writers_waiting"`
	LastWrite int64    `json:"last_write_token"`
}

// Semaphore is the semaphore of an inspected key: its stored limit and its
// live permits.
type Semaphore struct {
	Limit   int      `json:"limit"`
	Holders []Permit `json:"holders"`
}

// Permit is one live permit of a semaphore.
type Permit struct {
	Owner     string `json:"owner"`
	OwnerInfo *Owner `json:"owner_info"`
	LeaseMs   Millis `json:"lease_ms"`
	Token     int64  `json:"token"`
}

// Listing is a listing's locks, semaphores and read-write locks, and
// whether every server answered.
type Listing struct {
	Schema int `json:"schema"`
	// Complete is false when servers were skipped (Skipped says which and
	// why) or a limit cut the listing short (Truncated).
	Complete  bool     `json:"complete"`
	Skipped   []string `json:"skipped"`
	Truncated bool     `json:"truncated"`
	Locks     []Lock   `json:"locks"`
	// Semaphores and RWLocks are nil, and absent, over a store whose
	// listing does not show them (admin.Page.HoldsListed): absence claims
	// nothing, as Inspection's Semaphore.
	Semaphores []ListedSemaphore `json:"semaphores,omitzero"`
	RWLocks    []ListedRWLock    `json:"rwlocks,omitzero"`
}

// ListedSemaphore is a semaphore of a listing: its key and its
// Semaphore's fields.
type ListedSemaphore struct {
	Key    string `json:"key"`
	KeyHex string `json:"key_hex,omitempty"`
	Semaphore
}

// ListedRWLock is a read-write lock of a listing: its key and its
// RWLock's fields.
type ListedRWLock struct {
	Key    string `json:"key"`
	KeyHex string `json:"key_hex,omitempty"`
	RWLock
}

// Owner is a Locker's mutex.OwnerInfo.
type Owner struct {
	Service string `json:"service"`
	Host    string `json:"host"`
	PID     int    `json:"pid"`
	Label   string `json:"label"`
}

// Waiter is a Locker queued for a key.
type Waiter struct {
	Locker    string `json:"locker"`
	OwnerInfo *Owner `json:"owner_info"`
	Since     Time   `json:"since"`
	WaitedMs  Millis `json:"waited_ms"`
}

// Forced is one forced release of a key's audit stream.
type Forced struct {
	ID        string `json:"id"`
	At        Time   `json:"at"`
	By        string `json:"by"`
	Reason    string `json:"reason"`
	Token     int64  `json:"token"`
	Floor     int64  `json:"floor"`
	Owner     string `json:"owner"`
	OwnerInfo *Owner `json:"owner_info"`
	Count     int    `json:"count"`
}

// Node is one Redlock node's view of a key: its lock, or its error.
type Node struct {
	Node  int     `json:"node"`
	Addr  string  `json:"addr"`
	Error *string `json:"error"`
	Lock  *Lock   `json:"lock"`
}

// LockOf is in as the schema writes it.
func LockOf(in admin.LockInfo) Lock {
	j := Lock{
		Key: in.Key, RedisKey: in.Name, State: in.State.String(), Token: in.Token,
		Owner: in.Owner, OwnerInfo: OwnerOf(in.Info), Count: in.Count,
		AcquiredAt: Time(in.AcquiredAt), RenewedAt: Time(in.RenewedAt),
		LeaseMs: Millis(max(in.Lease, 0)), Waited: in.Waited,
		Waiters: []Waiter{}, ServerTime: Time(in.ServerTime),
	}
	j.KeyHex = keyHex(in.Key)
	if d, ok := HeldFor(in); ok {
		ms := Millis(d)
		j.HeldMs = &ms
	}
	for _, w := range in.Waiters {
		j.Waiters = append(j.Waiters, Waiter{Locker: w.Locker, OwnerInfo: OwnerOf(w.Info), Since: Time(w.Since), WaitedMs: Millis(w.Waited)})
	}
	return j
}

// InspectionOf is in as inspect writes it; explain words a node's error.
func InspectionOf(in admin.LockInfo, explain func(error) string) Inspection {
	j := Inspection{Schema: Schema, Lock: LockOf(in), Forced: []Forced{}, HeldAs: HeldAs(in, nil, nil)}
	for _, f := range in.Forced {
		j.Forced = append(j.Forced, Forced{
			ID: f.ID, At: Time(f.At), By: f.By, Reason: f.Reason, Token: f.Token, Floor: f.Floor,
			Owner: f.Owner, OwnerInfo: OwnerOf(f.Info), Count: f.Count,
		})
	}
	for _, n := range in.Nodes {
		nj := Node{Node: n.Node, Addr: n.Addr}
		if n.Err != nil {
			msg := explain(n.Err)
			nj.Error = &msg
		} else {
			l := LockOf(n.Info)
			nj.Lock = &l
		}
		j.Nodes = append(j.Nodes, nj)
	}
	return j
}

// SemaphoreOf is a semaphore (admin.Admin.InspectSemaphore) as the schema
// writes it; nil when it has neither a limit nor holders, as the text
// shows none.
func SemaphoreOf(s admin.SemaphoreInfo) *Semaphore {
	if s.Limit == 0 && len(s.Holders) == 0 {
		return nil
	}
	return &Semaphore{Limit: s.Limit, Holders: permitsOf(s.Holders)}
}

// RWLockOf is a read-write lock (admin.Admin.InspectRWLock) as the schema
// writes it; nil when it has no hold, no waiting writer and no write's
// token, as the text shows none.
func RWLockOf(rw admin.RWLockInfo) *RWLock {
	if !rw.Held() && rw.Waiting == 0 && rw.LastWrite == 0 {
		return nil
	}
	j := rwLockOf(rw)
	return &j
}

func rwLockOf(rw admin.RWLockInfo) RWLock {
	j := RWLock{Readers: permitsOf(rw.Readers), Waiting: rw.Waiting, LastWrite: rw.LastWrite}
	if rw.Writer != nil {
		j.Writer = &permitsOf([]admin.Holder{*rw.Writer})[0]
	}
	return j
}

// HeldAs is Inspection.HeldAs of a key whose lock is in, and whose
// semaphore and read-write lock are sem and rw (nil: none, or not shown).
func HeldAs(in admin.LockInfo, sem *Semaphore, rw *RWLock) []string {
	out := []string{}
	if in.State != admin.Free {
		out = append(out, "lock")
	}
	if sem != nil && len(sem.Holders) > 0 {
		out = append(out, "semaphore")
	}
	if rw != nil && (rw.Writer != nil || len(rw.Readers) > 0) {
		out = append(out, "rwlock")
	}
	return out
}

// ListingHolds fills in ls's semaphores and read-write locks from a
// listing's (admin.Page's): nil, and absent, unless listed (HoldsListed).
func ListingHolds(ls *Listing, listed bool, sems []admin.SemaphoreInfo, rws []admin.RWLockInfo) {
	if !listed {
		return
	}
	ls.Semaphores, ls.RWLocks = make([]ListedSemaphore, 0, len(sems)), make([]ListedRWLock, 0, len(rws))
	for _, s := range sems {
		ls.Semaphores = append(ls.Semaphores, ListedSemaphore{
			Key: s.Key, KeyHex: keyHex(s.Key), Semaphore: Semaphore{Limit: s.Limit, Holders: permitsOf(s.Holders)},
		})
	}
	for _, rw := range rws {
		ls.RWLocks = append(ls.RWLocks, ListedRWLock{Key: rw.Key, KeyHex: keyHex(rw.Key), RWLock: rwLockOf(rw)})
	}
}

func permitsOf(holders []admin.Holder) []Permit {
	out := make([]Permit, 0, len(holders))
	for _, h := range holders {
		out = append(out, Permit{Owner: h.Owner, OwnerInfo: OwnerOf(h.Info), LeaseMs: Millis(max(h.Lease, 0)), Token: h.Token})
	}
	return out
}

// keyHex is a key's key_hex: its bytes in hex when it is not UTF-8, else
// "".
func keyHex(key string) string {
	if utf8.ValidString(key) {
		return ""
	}
	return hex.EncodeToString([]byte(key))
}

// OwnerOf is nil for an owner without info (a WithOwner id, or none).
func OwnerOf(o mutex.OwnerInfo) *Owner {
	if o == (mutex.OwnerInfo{}) {
		return nil
	}
	return &Owner{Service: o.Service, Host: o.Host, PID: o.PID, Label: o.Label}
}

// String is mutex.OwnerInfo's.
func (o *Owner) String() string {
	return mutex.OwnerInfo{Service: o.Service, Host: o.Host, PID: o.PID, Label: o.Label}.String()
}

// HeldFor is how long in has been held, by the server's clock; ok is false
// when that is unknown: free, or a token that is not a server time.
func HeldFor(in admin.LockInfo) (d time.Duration, ok bool) {
	if in.State == admin.Free || in.AcquiredAt.IsZero() || in.ServerTime.IsZero() {
		return 0, false
	}
	return max(in.ServerTime.Sub(in.AcquiredAt), 0), true
}

// TimeLayout is how times are written, in tables and JSON alike: RFC 3339
// in UTC, to the microsecond (a token's resolution).
const TimeLayout = "2006-01-02T15:04:05.000000Z07:00"

// Time is a time that JSON writes in TimeLayout, null when zero.
type Time time.Time

func (t Time) MarshalJSON() ([]byte, error) {
	if time.Time(t).IsZero() {
		return []byte("null"), nil
	}
	return strconv.AppendQuote(nil, time.Time(t).UTC().Format(TimeLayout)), nil
}

// Format is t in UTC, in layout.
func (t Time) Format(layout string) string { return time.Time(t).UTC().Format(layout) }

// Millis is a duration that JSON writes in milliseconds, to the
// microsecond, and a page in words ("8.21s").
type Millis time.Duration

func (d Millis) MarshalJSON() ([]byte, error) {
	ms := float64(time.Duration(d).Round(time.Microsecond)) / float64(time.Millisecond)
	return strconv.AppendFloat(nil, ms, 'f', -1, 64), nil
}

func (d Millis) String() string {
	t := time.Duration(d)
	switch {
	case t <= 0:
		return "0"
	case t < time.Millisecond:
		return t.Round(time.Microsecond).String()
	case t < time.Second:
		return t.Round(100 * time.Microsecond).String()
	case t < time.Minute:
		return t.Round(10 * time.Millisecond).String()
	}
	return t.Round(time.Second).String()
}

// Visible is s as a terminal or a page may show it: s itself when every
// rune is printable and it neither starts with a double quote nor starts
// or ends with a space, else s quoted as a Go string ("tab\there",
// "\u202e", "\xff", "k "), so that no two keys print alike and no control
// or bidirectional character acts.
func Visible(s string) string {
	if utf8.ValidString(s) && !strings.HasPrefix(s, `"`) && strings.TrimSpace(s) == s &&
		!strings.ContainsFunc(s, func(r rune) bool { return !strconv.IsPrint(r) }) {
		return s
	}
	return strconv.Quote(s)
}

// Who is the holder as a person reads it: its owner info, else the raw
// owner id.
func (l Lock) Who() string {
	if l.OwnerInfo != nil {
		return l.OwnerInfo.String()
	}
	return l.Owner
}

// Who is the permit's holder as a person reads it, as Lock.Who.
func (p Permit) Who() string {
	if p.OwnerInfo != nil {
		return p.OwnerInfo.String()
	}
	return cmp.Or(p.Owner, "-")
}

// Longest is the longest wait among the waiters.
func (l Lock) Longest() Millis {
	var d Millis
	for _, w := range l.Waiters {
		d = max(d, w.WaitedMs)
	}
	return d
}

// WaitersText lists the waiters, one a line, made visible.
func (l Lock) WaitersText() string {
	var b strings.Builder
	for i, w := range l.Waiters {
		if i > 0 {
			b.WriteByte('\n')
		}
		who := w.Locker
		if w.OwnerInfo != nil {
			who = w.OwnerInfo.String()
		}
		b.WriteString(Visible(who) + ": " + w.WaitedMs.String())
	}
	return b.String()
}
