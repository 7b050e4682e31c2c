package etcdlock

import "errors"

// The sentinels of package etcdlock; the table in the package doc says which
// a caller gets when.
var (
	// ErrInvalid: bad input (a nil client, an empty key or owner, a key or
	// owner with a NUL byte, a TTL not positive, a token that cannot be
	// this Backend's, a negative token base, a List limit not positive).
	// Nothing was sent to etcd.
	ErrInvalid = errors.New("etcdlock: invalid input")
	// ErrClosed: the Backend was closed; nothing was sent to etcd.
	ErrClosed = errors.New("etcdlock: backend closed")
)
