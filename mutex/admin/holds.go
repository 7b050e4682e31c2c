package admin

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redfence/redfence/mutex"
	"github.com/redfence/redfence/mutex/backend"
)

// Holder is a permit of a semaphore, or a hold of a read-write lock, as
// its backend holds it.
type Holder struct {
	Owner string // the holder id
	// Info is what the holder's Locker was given with WithOwnerInfo (its
	// host and pid at least), read back from Owner.
	Info  mutex.OwnerInfo
	Token int64         // a reader's is the last write's
	Lease time.Duration // left, by the backend's clock
}

// SemaphoreInfo is a semaphore (mutex.NewSemaphore) as its backend holds
// it.
type SemaphoreInfo struct {
	Key     string   // the key given to NewSemaphore
	Limit   int      // the stored limit; 0 when none is
	Holders []Holder // the live permits, by the end of their lease
}

// Held reports whether a permit of the semaphore is held.
func (s SemaphoreInfo) Held() bool { return len(s.Holders) > 0 }

// RWLockInfo is a read-write lock (mutex.NewRWMutex) as its backend holds
// it.
type RWLockInfo struct {
	Key     string   // the key given to NewRWMutex
	Writer  *Holder  // nil when no write is held
	Readers []Holder // by the end of their lease
	Waiting int      // writers waiting (live marks)
	// LastWrite is the token of the last write granted; 0 when none is
	// remembered.
	LastWrite int64
}

// Held reports whether the read-write lock is held, by its writer or by
// readers.
func (r RWLockInfo) Held() bool { return r.Writer != nil || len(r.Readers) > 0 }

var (
	errSemaphoreUnsupported = fmt.Errorf("%w: this Locker's backend keeps no semaphores (backend.Semaphorer)", errors.ErrUnsupported)
	errRWUnsupported        = fmt.Errorf("%w: this Locker's backend keeps no read-write locks (backend.RWLocker)", errors.ErrUnsupported)
)

// InspectSemaphore returns the semaphore of key as the backend holds it:
// its stored limit and its live permits, each with its holder's OwnerInfo,
// in one round trip, changing nothing (a read-only script on Redis). A
// backend that keeps no semaphores (Redlock, etcd) returns an error
// matching errors.ErrUnsupported; bad input one matching mutex.ErrInvalid;
// a read that failed one matching mutex.ErrUnavailable.
func (a *Admin) InspectSemaphore(ctx context.Context, key string) (SemaphoreInfo, error) {
	if err := a.check(ctx, key); err != nil {
		return SemaphoreInfo{}, err
	}
	if a.sem == nil {
		return SemaphoreInfo{}, errSemaphoreUnsupported
	}
	st, err := a.sem.InspectSemaphore(ctx, key)
	if err != nil {
		return SemaphoreInfo{}, unavailable(err)
	}
	return semaphoreOf(key, st), nil
}

// InspectRWLock returns the read-write lock of key as the backend holds
// it: its writer or readers, each with its holder's OwnerInfo, its waiting
// writers and the last write's token, in one round trip, changing nothing.
// Errors are InspectSemaphore's, for a backend that keeps no read-write
// locks.
func (a *Admin) InspectRWLock(ctx context.Context, key string) (RWLockInfo, error) {
	if err := a.check(ctx, key); err != nil {
		return RWLockInfo{}, err
	}
	if a.rw == nil {
		return RWLockInfo{}, errRWUnsupported
	}
	st, err := a.rw.InspectRW(ctx, key)
	if err != nil {
		return RWLockInfo{}, unavailable(err)
	}
	return rwLockOf(key, st), nil
}

func semaphoreOf(key string, st backend.SemaphoreState) SemaphoreInfo {
	s := SemaphoreInfo{Key: key, Limit: st.Limit}
	for _, h := range st.Holders {
		s.Holders = append(s.Holders, holderOf(h.Owner, h.Token, h.Left))
	}
	return s
}

func rwLockOf(key string, st backend.RWState) RWLockInfo {
	r := RWLockInfo{Key: key, Waiting: st.Waiting, LastWrite: st.LastWrite}
	if w := st.Writer; w != nil {
		h := holderOf(w.Owner, w.Token, w.Left)
		r.Writer = &h
	}
	for _, h := range st.Readers {
		r.Readers = append(r.Readers, holderOf(h.Owner, h.Token, h.Left))
	}
	return r
}

func holderOf(owner string, token int64, left time.Duration) Holder {
	info, _ := parseOwner(owner)
	return Holder{Owner: owner, Info: info, Token: token, Lease: left}
}
