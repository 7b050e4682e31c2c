package redisfence

import (
	"context"

	"github.com/redis/go-redis/v9"
)

// queue is the pipeline Do gives fn: it queues, and refuses to execute.
// Executing it would send fn's commands in a MULTI/EXEC of their own,
// without the fence's SET, and end the WATCH that the fence's SET relies
// on; so Exec and its kin queue nothing, send nothing, and make Do fail.
// The embedded Pipeliner is a TxPipeline of the attempt's tx, which Do
// executes itself.
type queue struct {
	redis.Pipeliner
	executed bool
}

func (q *queue) Exec(context.Context) ([]redis.Cmder, error) {
	q.executed = true
	return nil, errExecuted
}

func (q *queue) Pipelined(context.Context, func(redis.Pipeliner) error) ([]redis.Cmder, error) {
	q.executed = true
	return nil, errExecuted
}

func (q *queue) TxPipelined(context.Context, func(redis.Pipeliner) error) ([]redis.Cmder, error) {
	q.executed = true
	return nil, errExecuted
}

// Pipeline and TxPipeline return q itself, as go-redis's pipelines return
// themselves, so that no path leads to an executable one.
func (q *queue) Pipeline() redis.Pipeliner   { return q }
func (q *queue) TxPipeline() redis.Pipeliner { return q }

var errExecuted = invalid("fn executed pipe; Do sends its commands, with the fence, in MULTI/EXEC")
