package redisdriver

import (
	"strconv"
	"sync"
	"time"

	"github.com/redfence/redfence/mutex/backend"
	"github.com/redfence/redfence/redis/internal/redisproto"
)

// hold is a Driver's state of one granted lock, the Grant's Handle: what
// every release and extension of it would otherwise compute again.
type hold struct {
	relKeys  [2]string     // the release script's keys: the lock key and its queue
	tokenStr string        // the token as the script returned it
	lease    time.Duration // the lease the acquisition asked for (releaseArgs)

	// The release command's lock key and token as the acquire command and
	// its reply boxed them, since boxing a string allocates; nil: boxed
	// when sent (releaseCmd).
	keyArg, tokenArg any
	// acquireCmd holds the acquire command that granted the lock, so that
	// the command and the handle cost one allocation (Driver.acquireOnce);
	// a waiter's longer command outgrows it.
	acquireCmd [7]any

	mu sync.Mutex // a leaf
	// released is closed when the last release (or handoff) of the lock
	// that the caller stopped waiting for ended; nil when none was
	// abandoned. A later release waits for it: one count each, in order.
	released <-chan struct{}
}

// newHold is a grant's handle: one allocation per grant.
func newHold(lockKey, queueKey, tokenStr string, lease time.Duration) *hold {
	return &hold{relKeys: [2]string{lockKey, queueKey}, tokenStr: tokenStr, lease: lease}
}

func (h *hold) lockKey() string { return h.relKeys[0] }

// abandonedRelease is the end of the last release call given up on, nil
// for none.
func (h *hold) abandonedRelease() <-chan struct{} {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.released
}

func (h *hold) setAbandonedRelease(done <-chan struct{}) {
	h.mu.Lock()
	h.released = done
	h.mu.Unlock()
}

// holdOf is l's handle, or for a Lease without one (or not this Driver's)
// one made from l alone: lease 0 (the release script's slow path) and no
// record of abandoned releases (own false).
func (d *Driver) holdOf(l backend.Lease) (h *hold, own bool, err error) {
	if h, ok := l.Handle.(*hold); ok && h != nil {
		return h, true, nil
	}
	lockKey, err := d.lockKey(l.Key)
	if err != nil {
		return nil, false, err
	}
	return newHold(lockKey, redisproto.QueueOf(lockKey), strconv.FormatInt(l.Token, 10), 0), false, nil
}

// releaseArgs are the release script's arguments for owner of h: the value
// the acquisition wrote when its token was the server time, which the
// script compares whole in its common case, and the token. The publish
// command is sent only when it is not the script's default, PUBLISH (on
// Cluster: SPUBLISH): every argument costs the server work on every
// release.
func (d *Driver) releaseArgs(owner string, h *hold) []any {
	v := redisproto.ReleaseValue(owner, h.tokenStr, h.lease)
	if d.publish == "PUBLISH" {
		return []any{v, h.tokenStr}
	}
	return []any{v, h.tokenStr, d.publish}
}

// releaseCmd is the release script's command (redisproto.ReleaseCall) for
// owner of h, with releaseArgs' arguments.
func (d *Driver) releaseCmd(owner string, h *hold) []any {
	keyArg, tokenArg := h.keyArg, h.tokenArg
	if keyArg == nil {
		keyArg = h.relKeys[0]
	}
	if tokenArg == nil {
		tokenArg = h.tokenStr
	}
	cmd := make([]any, 0, 8)
	cmd = redisproto.ReleaseCall.Args(cmd, len(h.relKeys))
	cmd = append(cmd, keyArg, h.relKeys[1], redisproto.ReleaseValue(owner, h.tokenStr, h.lease), tokenArg)
	if d.publish != "PUBLISH" {
		cmd = append(cmd, d.publish)
	}
	return cmd
}

// releaseID is the Abandoned id of a release of a Lease without a handle.
func releaseID(h *hold, owner string) string {
	return "\x00release\x00" + h.lockKey() + "\x00" + owner + "\x00" + h.tokenStr
}
