// Package admin is the operator's API over a mutex.Locker: what its
// backend holds (Inspect a key, InspectSemaphore and InspectRWLock the
// semaphore and read-write lock of one, List and ListAll keys by
// pattern, each holder with its Locker's OwnerInfo), a
// forced release that fences the old holder out (ForceRelease), and what
// the Locker's own process holds (Held). The redfence command and the
// debug page (mutex/lockdebug) are built on it; a service's own code
// needs none of it.
//
// Reads change nothing: the Redis drivers read with read-only scripts,
// which a CLIENT PAUSE WRITE does not hold. ForceRelease does not delete
// the key: it leaves a token floor above the holder's token, so the
// holder's renewal fails, every later token exceeds the floor, and a
// fence that records the floor (fenced.Guard.Raise) refuses the old
// holder's writes at once; who, when and why go to an audit stream beside
// the key. docs/operators.md is the operator's guide.
//
// # Errors
//
//	situation                                            error
//	bad argument, nil Locker or context                  mutex.ErrInvalid (nothing is sent)
//	a backend without backend.Inspector (for             errors.ErrUnsupported
//	  InspectSemaphore, Semaphorer; InspectRWLock, RWLocker)
//	no answer (Redlock: fewer than a quorum of nodes)    mutex.ErrUnavailable, node by node; never
//	                                                       an empty listing or a free key
//	ListAll: a quorum answered, not every node           ErrPartial, with the locks found
//	                                                       (List: Page.Skipped)
//	ForceRelease of a key not held (or held under        mutex.ErrNotHeld (nothing is changed)
//	  another token than the one given)
package admin
