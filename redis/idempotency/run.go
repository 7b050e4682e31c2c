package idempotency

import (
	"context"
	"errors"
	"net/http"

	"github.com/redfence/redfence/mutex"
	"github.com/redfence/redfence/redis/redisfence"
)

// run calls the handler under lk, on a context that carries the request's
// values but not its end: a client that times out is the case the key is
// for, and its retry must get the attempt's result, not a failure caused
// by its leaving (as with Stripe). The context ends when the lock is lost
// (cause mutex.ErrLockLost): a retry may run then. run settles its outcome: stored through the fence, the
// lock released, then the response sent (the client sees only an answer a
// retry will see too). A handler that panics releases the lock and leaves
// the record processing: a retry runs it again, as after a crash.
func (h *handler) run(w http.ResponseWriter, r *http.Request, id, fp string, lk *mutex.Lock) string {
	detached := context.WithoutCancel(r.Context())
	normal := false
	defer func() {
		if !normal {
			h.unlock(detached, lk)
		}
	}()
	c := newCapture(w, h.cfg.maxBody)
	hctx, cancel := lk.Join(detached)
	h.callNext(c, r.WithContext(hctx))
	cancel()
	normal = true
	c.Finish()

	err := h.complete(detached, id, lk.Token(), h.outcome(c, fp))
	held := h.unlock(detached, lk)
	switch {
	case errors.Is(err, redisfence.ErrStaleToken):
		return h.superseded(w, r, c, id, fp, true)
	case err != nil && !held:
		// Not known stored, and the lease ran out first: a retry may have
		// taken over, and its result is the one kept.
		h.tel.recordError(r.Context(), err)
		return h.superseded(w, r, c, id, fp, false)
	case err != nil:
		h.tel.recordError(r.Context(), err) // not stored: a retry runs the handler again
	}
	c.Replay()
	return OutcomeHandled
}

// outcome is the record a finished handler leaves: its response, or one
// saying it was not stored (too large, streamed, hijacked), or nil when its
// status is not stored (WithStoreStatus): the key is released.
func (h *handler) outcome(c *capture, fp string) *record {
	if !DefaultStoreStatus(c.Status()) || !h.cfg.storeStatus(c.Status()) {
		return nil
	}
	if rec := c.stored(fp, h.cfg.replayable); rec != nil {
		return rec
	}
	return &record{State: stateUnstored, FP: fp, Status: c.Status(), Reason: c.Reason()}
}

// superseded answers a request whose handler ran after it lost its key (it
// stalled past its lease): its result was refused (a retry took over), or
// its write failed, so a retry may have. Its client gets what the key's
// record holds, as every retry will: the retry's response, or 409 while
// that runs; 503 when the record cannot be read after a failed write, for
// what it holds is unknown. A response already written through (streamed)
// is the client's as it is.
func (h *handler) superseded(w http.ResponseWriter, r *http.Request, c *capture, id, fp string, refused bool) string {
	if c.Through() {
		return OutcomeSuperseded
	}
	c.Reset()
	rec, err := h.load(context.WithoutCancel(r.Context()), id)
	h.tel.recordError(r.Context(), err)
	switch {
	case err != nil && !refused:
		writeProblem(w, http.StatusServiceUnavailable, ProblemUnavailable, "the outcome of this request cannot be checked now", h.retryAfter())
		return OutcomeSuperseded
	case err != nil || rec == nil:
		rec = &record{State: stateProcessing, FP: fp}
	}
	h.answer(w, r, rec, fp)
	return OutcomeSuperseded
}
