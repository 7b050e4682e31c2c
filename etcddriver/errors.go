package etcddriver

import (
	"errors"

	"github.com/redfence/redfence/mutex/backend"
)

// The sentinels of package etcddriver; the table in the package doc says which
// a caller gets when.
var (
	// ErrInvalid: bad input (a nil client, an empty key or owner, a key or
	// owner with a NUL byte, a TTL not positive, a token that cannot be
	// this Backend's, a negative token base, a List limit not positive, a
	// List prefix or cursor with a NUL byte). Nothing was sent to etcd. It
	// is backend.ErrInvalid, which is mutex.ErrInvalid: one errors.Is
	// matches the driver's refusals and the Locker's.
	ErrInvalid = backend.ErrInvalid
	// ErrClosed: the Backend was closed; nothing was sent to etcd.
	ErrClosed = errors.New("etcddriver: backend closed")
)
