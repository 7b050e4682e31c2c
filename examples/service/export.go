package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/redfence/redfence/mutex"
)

// exportLimit is how many exports run at once, across every replica: the
// semaphore's permits live in Redis.
const exportLimit = 3

// export answers GET /export: a report streamed for -export-for, as an
// expensive query would be. It waits up to -queue-for for one of the
// exportLimit permits, then answers 429 Too Many Requests with Retry-After.
// The permit is held, and renewed, while the export streams; the export
// stops when its client leaves or the permit is lost.
func (s *service) export(w http.ResponseWriter, r *http.Request) {
	queued, cancel := context.WithTimeout(r.Context(), s.cfg.queueFor)
	p, err := s.exports.Acquire(queued)
	cancel()
	switch {
	case r.Context().Err() != nil:
		return // the client left, or the service is stopping
	case errors.Is(err, mutex.ErrUnavailable), errors.Is(err, mutex.ErrClosed):
		http.Error(w, "the export queue is unavailable", http.StatusServiceUnavailable)
		return
	case errors.Is(err, mutex.ErrNotAcquired):
		w.Header().Set("Retry-After", strconv.Itoa(int(max(time.Second, s.cfg.queueFor).Seconds())))
		http.Error(w, fmt.Sprintf("%d exports are running; try again later", exportLimit), http.StatusTooManyRequests)
		return
	case err != nil:
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	log := s.log.With("permit", p.Token())
	defer func() {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), 2*time.Second)
		defer cancel()
		_ = p.Release(ctx) // ErrNotHeld after a loss: nothing left to give back
		log.Info("export ended")
	}()
	log.Info("export started")
	ctx, stop := p.Join(r.Context()) // ends with the client, or with the permit
	defer stop()

	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	fmt.Fprintf(w, "export by %s, permit %d of %q\n", s.cfg.name, p.Token(), s.exports.Key())
	rows := time.NewTicker(s.cfg.exportFor / 10)
	defer rows.Stop()
	for i := 1; i <= 10; i++ {
		if f, ok := w.(http.Flusher); ok {
			f.Flush() // the client sees the export begin, then each row
		}
		select {
		case <-ctx.Done():
			log.Info("export cut short", "cause", context.Cause(ctx))
			return
		case <-rows.C:
			fmt.Fprintf(w, "row %d\n", i)
		}
	}
}
