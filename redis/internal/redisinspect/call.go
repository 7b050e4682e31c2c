package redisinspect

import (
	"context"
	"errors"

	"github.com/redis/go-redis/v9"
)

// interruptible runs fn under ctx. Inspection is a person's, who
// interrupts it: a client that applies ctx's deadline to its sockets still
// does not stop reading when ctx is cancelled, so fn runs apart, on the
// driver's goroutine, unless ctx cannot end. When ctx ends first, pending
// reports fn's eventual result, and whatever fn writes is not to be read.
func (in *Inspector) interruptible(ctx context.Context, fn func(context.Context) error) (pending <-chan error, err error) {
	if ctx.Done() == nil {
		return nil, fn(ctx)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	res := make(chan error, 1) // buffered: an abandoned call never blocks
	in.cfg.Go(func() { res <- fn(ctx) })
	select {
	case err := <-res:
		return nil, err
	case <-ctx.Done():
		return res, ctx.Err()
	}
}

// eachServer runs fn for every server at once, each under ctx's deadline,
// and returns each one's result and error. A server that had not answered
// when ctx ended gets ctx's error and no result: what its call does later
// is never read (an outcome unknown, not an answer).
func eachServer[T any](in *Inspector, ctx context.Context, fn func(ctx context.Context, i int, c redis.UniversalClient) (T, error)) ([]T, []error) {
	servers := in.cfg.Servers
	results := make([]T, len(servers))
	errs := make([]error, len(servers))
	if len(servers) == 1 {
		results[0], errs[0] = oneServer(in, ctx, fn)
		return results, errs
	}
	type reply struct {
		i   int
		v   T
		err error
	}
	if err := ctx.Err(); err != nil {
		for i := range errs {
			errs[i] = err
		}
		return results, errs
	}
	replies := make(chan reply, len(servers)) // buffered: abandoned calls never block
	for i, c := range servers {
		in.cfg.Go(func() {
			v, err := fn(ctx, i, c)
			replies <- reply{i, v, err}
		})
	}
	answered := make([]bool, len(servers))
	for range servers {
		var r reply
		select {
		case r = <-replies:
		case <-ctx.Done():
			for i := range errs {
				if !answered[i] {
					errs[i] = ctx.Err()
					in.noAnswer(errs[i]) // a deadline: on Cluster, a replica may have taken over
				}
			}
			return results, errs
		}
		answered[r.i], errs[r.i] = true, r.err
		if r.err == nil {
			results[r.i] = r.v
		}
		in.noAnswer(r.err)
	}
	return results, errs
}

// oneServer is eachServer for one server: on the caller's goroutine when
// ctx cannot end.
func oneServer[T any](in *Inspector, ctx context.Context, fn func(ctx context.Context, i int, c redis.UniversalClient) (T, error)) (T, error) {
	var v T // written by fn, read only once fn has returned here
	pending, err := in.interruptible(ctx, func(ctx context.Context) error {
		var err error
		v, err = fn(ctx, 0, in.cfg.Servers[0])
		return err
	})
	in.noAnswer(err)
	if pending != nil || err != nil {
		var zero T
		return zero, err
	}
	return v, nil
}

// noAnswer tells the driver of a call its server did not answer.
func (in *Inspector) noAnswer(err error) {
	if in.cfg.NoAnswer != nil && unanswered(err) {
		in.cfg.NoAnswer(err)
	}
}

// unanswered reports whether err says the server did not answer, rather
// than answered with an error or was not asked.
func unanswered(err error) bool {
	var rerr redis.Error
	switch {
	case err == nil, errors.Is(err, context.Canceled), errors.Is(err, redis.ErrClosed), errors.As(err, &rerr):
		return false
	}
	return true
}
