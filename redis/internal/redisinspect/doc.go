// Package redisinspect is backend.Inspector over Redis: inspection,
// listing and forced release of the lock keys redisproto writes, on one
// deployment (standalone, Sentinel or Cluster) or on Redlock's independent
// nodes deciding by quorum, and backend.HoldLister: the listing of the
// semaphores and read-write locks beside them. The Redis drivers (redisdriver, redlockdriver)
// embed an Inspector; the Locker knows no Redis.
//
// Every read is a read-only script (EVALSHA_RO where the server has it),
// so a CLIENT PAUSE WRITE does not hold an operator's look. Calls a person
// may interrupt run on the driver's goroutines (Config.Go), so that a hung
// server never holds the caller past its ctx.
package redisinspect
