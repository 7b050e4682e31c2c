package runner

import (
	"context"

	"github.com/redfence/redfence/internal/bounded"
)

// bounded runs fn and returns by ctx's deadline, with go-redis's default
// client too (internal/bounded); Run waits for a call it stopped waiting
// for before it returns.
func (r *Runner) bounded(ctx context.Context, fn func(ctx context.Context) error) error {
	return bounded.Call(ctx, r.ctxAware, &r.calls, fn)
}
