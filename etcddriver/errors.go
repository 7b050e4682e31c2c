package etcddriver

import (
	"errors"

	"github.com/redfence/redfence/mutex/backend"
)

// The sentinels of package etcddriver; the table in the package doc says which
// a caller gets when.
var (
	// ErrInvalid: bad input (from New: a nil client, a prefix with a NUL
	// byte, a negative token base; from a call: an empty key or owner, a
	// key or owner with a NUL byte, a TTL not positive, a token that cannot
	// be this Driver's, a List count not positive). Nothing was sent to
	// etcd. It is backend.ErrInvalid, which is mutex.ErrInvalid: one
	// errors.Is matches the driver's refusals and the Locker's.
	ErrInvalid = backend.ErrInvalid
	// ErrClosed: the Driver was closed; nothing was sent to etcd.
	ErrClosed = errors.New("etcddriver: driver closed")
)
