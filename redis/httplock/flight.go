package httplock

import (
	"context"
	"net/http"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/redfence/redfence/mutex"
)

// A flight is one in-process collapse: the first request for a key leads it,
// later ones wait for its outcome. It ends with its leader; the next request
// for the key starts a new one.
type flight struct {
	done      chan struct{}
	aged      time.Time // past it, the leader counts as stalled (its lease, WithTTL)
	out       outcome   // written by the leader before done is closed
	followers int       // requests that joined it; under handler.mu
}

// An outcome is how a flight ended, for the requests waiting on it.
type outcome struct {
	res      *entry // the response to share; nil: none, the waiters call the origin
	panicked bool   // the leader's handler panicked

	// reply is the leader's own response, still to be sent to its client
	// once the waiters are released (nil: sent already). Not for waiters.
	reply *capture
}

// collapse serves r as the leader of key's local flight, or as a follower
// of the flight already there. Waiting, here or in cluster, ends by
// deadline, however many flights r goes through.
func (h *handler) collapse(w http.ResponseWriter, r *http.Request, key string, deadline time.Time) string {
	wait := time.NewTimer(time.Until(deadline))
	defer wait.Stop()
	for {
		h.mu.Lock()
		fl, ok := h.flights[key]
		if !ok {
			fl = &flight{done: make(chan struct{}), aged: time.Now().Add(h.cfg.ttl)}
			h.flights[key] = fl
		} else {
			fl.followers++
		}
		h.mu.Unlock()
		if !ok {
			return h.leadFlight(w, r, key, fl, deadline)
		}
		switch h.follow(r, fl, wait.C) {
		case flightDone:
			switch {
			case fl.out.panicked:
				return h.afterPanic(w, r)
			case fl.out.res != nil:
				return h.use(w, r, fl.out.res)
			}
		case flightAged:
			// The local leader is stalled past its lease: retire its
			// flight, and lead or join the next one.
			h.mu.Lock()
			if h.flights[key] == fl {
				delete(h.flights, key)
			}
			h.mu.Unlock()
			continue
		}
		// Nothing to share, the wait timed out, or the client is gone (the
		// origin call then returns quickly on a handler that watches its
		// context, and its response goes nowhere).
		return h.origin(w, r, RoleBypass)
	}
}

// A leader is the request leading a local flight, at work: what it has
// found out for the requests waiting on it, and whether it has told them.
// Only the leader's goroutine uses it, and the handler it runs, which is
// done with it before it returns.
type leader struct {
	key   string
	fl    *flight
	out   outcome
	lk    *mutex.Lock // the key's lock, while held and owed an announcement (see end)
	ended bool        // the waiters are told: fl.done is closed
}

// leadFlight leads the local flight for key: whatever happens, including a
// panic, the flight ends and its waiters are released with its outcome.
// Only then does a leader that called the origin send its response to its
// own client, which may be slow to read it.
func (h *handler) leadFlight(w http.ResponseWriter, r *http.Request, key string, fl *flight, deadline time.Time) string {
	ld := &leader{key: key, fl: fl}
	detached := context.WithoutCancel(r.Context())
	defer h.end(detached, ld) // cluster panicked: the handler's panic goes on
	var role string
	if h.health.up() {
		role = h.cluster(w, r, ld, deadline)
	} else {
		role = h.leadLocal(w, r, ld)
	}
	h.end(detached, ld)
	if ld.out.reply != nil {
		ld.out.reply.Replay()
	}
	return role
}

// leadLocal calls the origin for ld's local flight alone, without a Redis
// call: Redis is marked down, or a call made for this flight has just failed
// (and marked it down). ld's waiters get its response as from any leader;
// the other replicas hear nothing of it, and nothing is stored. The span
// says why: redfence.http.bypass=redis_down (the cross-replica step was
// skipped), with role leader.
func (h *handler) leadLocal(w http.ResponseWriter, r *http.Request, ld *leader) string {
	trace.SpanFromContext(r.Context()).SetAttributes(attrBypass.String(bypassRedisDown))
	h.lead(w, r, ld, nil, false)
	return RoleLeader
}

// end tells ld's waiters how its flight ended, as ld.out says now, once:
// later calls do nothing, and what the waiters were told stands. When ld
// holds the key's lock, the other replicas' are told first (see finish);
// then the flight is retired and its local waiters released. It may run
// while the handler still runs, as soon as its response cannot be shared.
func (h *handler) end(ctx context.Context, ld *leader) {
	if ld.ended {
		return
	}
	ld.ended = true
	if ld.lk != nil {
		msg := msgReady // msgNoShare when there is no response
		if ld.out.panicked {
			msg = msgPanic
		}
		h.finish(ctx, ld.key, ld.lk, ld.out.res, msg)
	}
	h.mu.Lock()
	if h.flights[ld.key] == ld.fl {
		delete(h.flights, ld.key)
	}
	h.mu.Unlock()
	ld.fl.out = outcome{res: ld.out.res, panicked: ld.out.panicked}
	close(ld.fl.done)
}

type followOutcome int

const (
	flightDone followOutcome = iota
	flightAged
	followGaveUp
)

// follow waits for the local flight's leader, within the request's own
// context, the wait (WithWait) and the flight's lease (WithTTL).
func (h *handler) follow(r *http.Request, fl *flight, timeout <-chan time.Time) followOutcome {
	aged := time.NewTimer(time.Until(fl.aged))
	defer aged.Stop()
	select {
	case <-fl.done:
		return flightDone
	case <-aged.C:
		return flightAged
	case <-timeout:
	case <-r.Context().Done():
	}
	return followGaveUp
}
