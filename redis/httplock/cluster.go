package httplock

import (
	"context"
	"math/rand/v2"
	"net/http"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redfence/redfence/mutex"
)

// What a leader publishes on its key's channel when its flight ends, before
// it releases the lock: only requests waiting on it then hear it.
const (
	msgReady   = "ready"   // the response is stored: read it
	msgNoShare = "noshare" // nothing to share: call the origin, all at once
	msgPanic   = "panic"   // the handler panicked: WithPanicStatus, or the origin
)

// cluster runs the cross-replica step for the local flight's leader: serve a
// response another replica already shared, or take the key's lock and become
// the one origin call, or wait for the lock holder's publication, or give
// up waiting and call the origin.
//
// Waiting is bounded by the wait (WithWait), on a context detached from the
// request (the local followers depend on it). Waiting replicas do not queue
// on the lock: one publication wakes them all, and each reads the stored
// response with one GET or, told there is none, calls the origin. Polling
// (TryLock again every 100-200 ms) is only the fallback for a lost
// publication or a leader that stalled past its lease (WithTTL).
//
// Waiting ends by deadline, the wait (WithWait) from r's arrival. Each Redis
// call has its own bound (WithStoreTimeout), so a wait may overrun it by
// one call. A call that fails marks Redis down, and r leads its local
// flight without Redis (leadLocal): it makes no further call, and its local
// followers still get its response.
func (h *handler) cluster(w http.ResponseWriter, r *http.Request, ld *leader, deadline time.Time) string {
	key := ld.key
	detached := context.WithoutCancel(r.Context())
	wctx, cancel := context.WithDeadline(detached, deadline)
	defer cancel()
	var ps *redis.PubSub
	defer func() {
		if ps != nil {
			_ = ps.Close()
		}
	}()
	// A failed call has marked Redis down: r leads its local flight alone,
	// the subscription's connection given back first.
	local := func() string {
		if ps != nil {
			_ = ps.Close()
			ps = nil
		}
		return h.leadLocal(w, r, ld)
	}
	for {
		e, err := h.load(detached, key)
		if err != nil {
			return local()
		}
		if e != nil {
			ld.out.res = e
			return h.use(w, r, e)
		}
		lk, err := h.tryLock(detached, key)
		if err != nil {
			return local()
		}
		if lk != nil {
			owned := ps
			ps = nil // won closes it
			return h.won(w, r, ld, lk, owned)
		}
		if ps == nil {
			// Subscribe, then look again: a publication between our GET and
			// the subscription is not missed.
			if ps, err = h.subscribe(detached, key); err != nil {
				return local()
			}
			continue
		}
		if msg := h.awaitReady(wctx, ps, pollMin+rand.N(pollMax-pollMin)); msg == msgNoShare || msg == msgPanic {
			return h.heard(w, r, msg, ld)
		}
		if wctx.Err() != nil {
			return h.origin(w, r, RoleBypass)
		}
	}
}

// won serves r once it holds key's lock: as a waiter of the leader before
// it, whose message may still be unread (it published and released just
// before our TryLock); from a response shared meanwhile; or as the leader.
// ps is nil when r did not wait; won closes it before anything else, as it
// holds a connection of its own for as long as it is open.
func (h *handler) won(w http.ResponseWriter, r *http.Request, ld *leader, lk *mutex.Lock, ps *redis.PubSub) string {
	detached := context.WithoutCancel(r.Context())
	if ps != nil {
		msg := h.awaitReady(detached, ps, time.Millisecond)
		_ = ps.Close()
		if msg == msgNoShare || msg == msgPanic {
			h.unlock(detached, lk)
			return h.heard(w, r, msg, ld)
		}
	}
	e, err := h.load(detached, ld.key)
	if e != nil {
		h.unlock(detached, lk)
		ld.out.res = e
		return h.use(w, r, e)
	}
	// After a failed call the lock is left to its lease: Redis is down,
	// and more calls would only add to this request's time.
	h.lead(w, r, ld, lk, err == nil)
	return RoleLeader
}

// heard serves r as a leader's msgNoShare or msgPanic says. It releases
// r's own local followers first, with the same news: they call the origin
// (or answer WithPanicStatus) at once, not after r's origin call.
func (h *handler) heard(w http.ResponseWriter, r *http.Request, msg string, ld *leader) string {
	ld.out.panicked = msg == msgPanic
	h.end(context.WithoutCancel(r.Context()), ld)
	if ld.out.panicked {
		return h.afterPanic(w, r)
	}
	return h.origin(w, r, RoleBypass)
}

// lead calls the origin for everyone: the handler runs on a context detached
// from the leader's client (bounded by WithTimeout), its response is
// captured and, when finish is set, shared through Redis (see finish). A
// response that may be shared is only buffered: it is left in ld.out.reply
// for the leader's client, to be sent once the waiters have it. One found
// unshareable while the handler runs ends the flight there and then (end):
// the waiters do not wait for the rest of a stream or a large body.
func (h *handler) lead(w http.ResponseWriter, r *http.Request, ld *leader, lk *mutex.Lock, finish bool) {
	detached := context.WithoutCancel(r.Context())
	hctx, cancel := context.WithTimeout(detached, h.cfg.timeout)
	defer cancel()
	if finish {
		ld.lk = lk // end announces and unlocks
	}
	normal := false
	defer func() {
		if !normal { // the handler panicked (or called runtime.Goexit)
			ld.out.panicked = true
			h.end(detached, ld) // nothing, if it was told already
		}
	}()

	h.setRole(w, RoleLeader) // before the capture: it is not the handler's header
	markWaited(r)
	c := newCapture(w, r, h.cfg.maxBody, func(status int, hdr http.Header) string {
		return notShareable(status, hdr, h.cfg.shareStatus)
	}, func() { h.end(detached, ld) }) // ld.out.res is nil: msgNoShare
	h.tel.originCall(r.Context())
	h.next.ServeHTTP(c, r.WithContext(hctx))
	normal = true

	ld.out.reply = c
	ld.out.res = c.entry(h.cfg.roleHeader, h.cfg.shareWindow)
	h.end(detached, ld)
}

// finish ends a leader's flight in Redis: it stores e for the share window
// (when e is not nil), publishes msg (msgNoShare instead of msgReady when
// there is nothing stored) while still holding the lock, so that only
// requests waiting on this leader hear it, then releases the lock. It stops
// at the first failed call: Redis is then marked down, and the lock runs
// out with its lease.
func (h *handler) finish(ctx context.Context, key string, lk *mutex.Lock, e *entry, msg string) {
	if e == nil && msg == msgReady {
		msg = msgNoShare
	}
	if e != nil {
		b, err := e.encode()
		if err != nil {
			h.tel.recordError(ctx, err)
			msg = msgNoShare
		} else if err := h.callWithin(ctx, h.cfg.storeTimeout+setAllowance(len(b)), true, func(ctx context.Context) error {
			return h.client.Set(ctx, h.cfg.prefix+key, b, e.ttl).Err()
		}); err != nil {
			return
		}
	}
	if h.publish(ctx, key, msg) != nil {
		return
	}
	h.unlock(ctx, lk)
}
