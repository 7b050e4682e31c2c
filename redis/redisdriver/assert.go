package redisdriver

import "github.com/redfence/redfence/mutex/backend"

// The capabilities a Driver has, checked by the compiler.
var (
	_ backend.Backend      = (*Driver)(nil)
	_ backend.Watcher      = (*Driver)(nil)
	_ backend.HandOffer    = (*Driver)(nil)
	_ backend.Queuer       = (*Driver)(nil)
	_ backend.ReplicaAcker = (*Driver)(nil)
	_ backend.BulkReleaser = (*Driver)(nil)
	_ backend.Inspector    = (*Driver)(nil)
	_ backend.Semaphorer   = (*Driver)(nil)
	_ backend.RWLocker     = (*Driver)(nil)
)
