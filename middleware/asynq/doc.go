// Package asynqlock will be an asynq.MiddlewareFunc that lets one task
// handler per key run at a time, cluster-wide.
//
// Not implemented yet (issue 7). Nothing here works.
package asynqlock
