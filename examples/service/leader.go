package main

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/redfence/redfence/election"
	"github.com/redfence/redfence/fenced"
)

const (
	electionName = "service-job" // its lock is "election:service-job"
	jobName      = "items"       // the job's row in the checkpoint table
	// checkpointFence is the resource every write of the checkpoint is
	// fenced on, with the writer's term.
	checkpointFence = "service:checkpoint"
)

// errDeposed: the fence refused the job's write while its term seemed to
// last, so a newer term has written and this replica no longer leads.
var errDeposed = errors.New("deposed: a newer term wrote the checkpoint")

// campaign runs the job whenever this replica leads, until ctx ends.
// election.Run campaigns again by itself after a term ends; it returns
// when the job returns while its term lasts, as the job does when deposed.
func (s *service) campaign(ctx context.Context) error {
	for {
		err := s.election.Run(ctx, s.cfg.name, s.lead)
		if ctx.Err() != nil {
			return nil
		}
		if !errors.Is(err, errDeposed) {
			return err
		}
	}
}

// lead is the leader's job. It processes items (a count, here), ten per
// interval, and checkpoints the count every interval, so that the next
// leader resumes from it. It reads the checkpoint once, when its term
// begins, and writes absolute counts from then on: a deposed leader that
// wrote would roll back its successor's progress. The fence stops that:
// every write carries the term, and a lower term than the highest recorded
// is refused in the write's own transaction.
//
// When its term ends (lost, resigned, or the service stopping) the job
// writes its count once more, after the term: what it processed since its
// last checkpoint would be lost otherwise. That write is safe only because
// it is fenced: if a newer leader has begun, it is refused. A leader
// stalled past its lease (SIGSTOP, a long pause) does just that when it
// wakes up.
func (s *service) lead(_ context.Context, t *election.Term) error {
	log := s.log.With("term", t.Token())
	items, err := s.resume(t, log)
	if err != nil {
		return err // deposed, or the term ended before the checkpoint was read: nothing to save
	}
	work := time.NewTicker(s.cfg.interval / 10)
	defer work.Stop()
	save := time.NewTicker(s.cfg.interval)
	defer save.Stop()
	for {
		select {
		case <-work.C:
			items++ // an item processed
		case <-save.C:
			if err := s.save(t.Context(), t, items, log); errors.Is(err, errDeposed) {
				return err
			}
		case <-t.Context().Done():
			log.Info("term ended", "cause", context.Cause(t.Context()))
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_ = s.save(ctx, t, items, log) // fenced: refused if a newer term began
			return nil
		}
	}
}

// resume reads the checkpoint as the term's first write: Do records the
// term first, so from then on no lower term can write, and what it reads
// is the last count any earlier term wrote. It retries every interval
// until it succeeds, the fence refuses the term (errDeposed) or the term
// ends (its context's cause).
func (s *service) resume(t *election.Term, log *slog.Logger) (int64, error) {
	for {
		var items int64
		var from string
		err := s.guard.Do(t.Context(), checkpointFence, t.Token(), func(ctx context.Context, tx pgx.Tx) error {
			return tx.QueryRow(ctx, `SELECT items, replica FROM `+schema+`.checkpoint WHERE job = $1`, jobName).Scan(&items, &from)
		})
		if err == nil {
			log.Info("leading", "items", items, "checkpoint_by", from)
			return items, nil
		}
		if errors.Is(err, fenced.ErrStaleToken) {
			log.Warn("refused by the fence: a newer term began", "err", err)
			return 0, errDeposed
		}
		if t.Context().Err() == nil {
			log.Error("reading the checkpoint", "err", err)
		}
		select {
		case <-t.Context().Done():
			return 0, context.Cause(t.Context())
		case <-time.After(s.cfg.interval):
		}
	}
}

// save writes the checkpoint through the fence with the term's token. A
// refusal is errDeposed; other failures are logged and the next save
// tries again.
func (s *service) save(ctx context.Context, t *election.Term, items int64, log *slog.Logger) error {
	err := s.guard.Do(ctx, checkpointFence, t.Token(), func(ctx context.Context, tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `UPDATE `+schema+`.checkpoint SET items = $2, term = $3, replica = $4, updated_at = now() WHERE job = $1`,
			jobName, items, t.Token(), s.cfg.name)
		return err
	})
	var stale *fenced.StaleTokenError
	switch {
	case errors.As(err, &stale):
		log.Warn("checkpoint refused by the fence", "items", items, "highest_term", stale.Highest)
		return errDeposed
	case err != nil:
		if ctx.Err() == nil { // not the term ending mid-write: lead saves once more
			log.Error("checkpoint not written", "items", items, "err", err)
		}
		return err
	}
	log.Info("checkpoint written", "items", items)
	return nil
}

// checkpointView is what GET /checkpoint answers.
type checkpointView struct {
	Items      int64     `json:"items"`
	Term       int64     `json:"term"`    // the term that wrote it
	Replica    string    `json:"replica"` // the replica that wrote it
	UpdatedAt  time.Time `json:"updated_at"`
	Fence      int64     `json:"fence"`            // the highest term the fence recorded
	Leader     string    `json:"leader,omitempty"` // who leads now, if anyone
	AnsweredBy string    `json:"answered_by"`
}

// checkpoint answers GET /checkpoint: the job's row, its fence and the
// leader, from any replica.
func (s *service) checkpoint(w http.ResponseWriter, r *http.Request) {
	cp := checkpointView{AnsweredBy: s.cfg.name}
	err := s.pool.QueryRow(r.Context(), `SELECT items, term, replica, updated_at FROM `+schema+`.checkpoint WHERE job = $1`, jobName).
		Scan(&cp.Items, &cp.Term, &cp.Replica, &cp.UpdatedAt)
	if err == nil {
		var fences []fenced.Fence
		if fences, err = s.guard.Fences(r.Context(), checkpointFence, 1); err == nil && len(fences) == 1 {
			cp.Fence = fences[0].Token
		}
	}
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	// Leader reads the lock's holder with a read-only script, which the
	// embedded Redis (miniredis) refuses: the field is empty there.
	if l, err := s.election.Leader(r.Context()); err == nil {
		cp.Leader = l.Value
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(cp)
}
