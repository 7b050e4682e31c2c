package httplock

import (
	"net/http"
	"time"
)

// A flight is one in-process collapse: the first request for a key leads it,
// later ones wait for its outcome. It ends with its leader; the next request
// for the key starts a new one.
type flight struct {
	done chan struct{}
	aged time.Time // past it, the leader counts as stalled (lock age)
	out  outcome   // written by the leader before done is closed
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
			fl = &flight{done: make(chan struct{}), aged: time.Now().Add(h.cfg.lockAge)}
			h.flights[key] = fl
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
			// The local leader is stalled past the lock age: retire its
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

// leadFlight leads the local flight for key: whatever happens, including a
// panic, the flight ends and its waiters are released with its outcome.
// Only then does a leader that called the origin send its response to its
// own client, which may be slow to read it.
func (h *handler) leadFlight(w http.ResponseWriter, r *http.Request, key string, fl *flight, deadline time.Time) string {
	var out outcome
	released := false
	release := func() {
		released = true
		h.mu.Lock()
		if h.flights[key] == fl {
			delete(h.flights, key)
		}
		h.mu.Unlock()
		fl.out = outcome{res: out.res, panicked: out.panicked}
		close(fl.done)
	}
	defer func() {
		if !released { // cluster panicked: the handler's panic goes on
			release()
		}
	}()
	role := h.cluster(w, r, key, &out, deadline)
	release()
	if out.reply != nil {
		out.reply.replay()
	}
	return role
}

type followOutcome int

const (
	flightDone followOutcome = iota
	flightAged
	followGaveUp
)

// follow waits for the local flight's leader, within the request's own
// context, the wait timeout and the flight's lock age.
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
