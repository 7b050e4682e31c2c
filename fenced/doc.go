// Package fenced will be the PostgreSQL half of redfence: a Guard that, in the
// same transaction as a write, rejects the write when it carries a fencing
// token lower than the highest one recorded for its resource. Locks are
// advisory; tokens are authoritative.
//
// Not implemented yet (issue 5). Nothing here works.
package fenced
