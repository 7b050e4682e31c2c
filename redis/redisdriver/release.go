package redisdriver

import (
	"context"
	"errors"
	"strconv"

	"github.com/redfence/redfence/mutex/backend"
	"github.com/redfence/redfence/redis/internal/redisproto"
	"github.com/redfence/redfence/redis/internal/redisrt"
)

func formatToken(t int64) string { return strconv.FormatInt(t, 10) }

// Release runs the release script: one count taken, the counts left (0:
// freed, and when a waiting Lock found the key held meanwhile, reserved
// for the first queued Locker and published), or -1 when owner and token
// do not hold the key. An error leaves the outcome unknown. A release of a
// lock whose earlier release or handoff was given up on comes after that
// call: when ctx ends first, it is sent in the background once the call
// ended (on a context of its own), and Release returns ctx's error.
func (d *Driver) Release(ctx context.Context, l backend.Lease) (int64, error) {
	h, own, err := d.holdOf(l)
	if err != nil {
		return 0, err
	}
	if done := d.abandonedBefore(h, own, l.Owner); done != nil {
		select {
		case <-done:
		case <-ctx.Done():
			d.run.Go(func() {
				<-done
				ctx, cancel := context.WithTimeout(context.Background(), redisrt.CleanupTimeout)
				defer cancel()
				_, _ = d.release(ctx, l.Owner, h, own)
			})
			return 0, ctx.Err()
		}
	}
	return d.release(ctx, l.Owner, h, own)
}

func (d *Driver) release(ctx context.Context, owner string, h *hold, own bool) (int64, error) {
	if d.run.Direct(ctx) { // no closure: the uncontended path allocates less
		n, err := redisproto.ReleaseCall.Run(ctx, d.client, d.releaseCmd(owner, h)).Int64()
		d.reload.NoAnswer(err)
		return n, err
	}
	var n int64
	pending, err := d.run.Call(ctx, func(ctx context.Context) error {
		var err error
		n, err = redisproto.ReleaseCall.Run(ctx, d.client, d.releaseCmd(owner, h)).Int64()
		return err
	})
	d.reload.NoAnswer(err)
	if pending != nil {
		d.abandonRelease(h, own, owner, pending)
		return 0, err // the abandoned call may still write n
	}
	return n, err
}

// abandonedBefore is the end of the last release of h given up on, nil
// when there is none to wait for.
func (d *Driver) abandonedBefore(h *hold, own bool, owner string) <-chan struct{} {
	if !own {
		return d.abandoned.Done(releaseID(h, owner))
	}
	return h.abandonedRelease()
}

// afterAbandoned waits, within ctx, for the last release of h given up on.
func (d *Driver) afterAbandoned(ctx context.Context, h *hold, own bool, owner string) error {
	done := d.abandonedBefore(h, own, owner)
	if done == nil {
		return nil
	}
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// abandonRelease records a release (or handoff) call of h given up on, for
// the next release to wait for.
func (d *Driver) abandonRelease(h *hold, own bool, owner string, pending <-chan error) {
	if own {
		h.setAbandonedRelease(d.run.Settled(pending))
	} else {
		d.abandoned.Add(releaseID(h, owner), pending)
	}
}

// ReleaseAll takes one count of each lease in one pipelined round trip,
// bounded by redisrt.CleanupTimeout whatever their number. The error joins
// those of the releases whose outcome is unknown (all of them when the
// pipeline was given up on).
func (d *Driver) ReleaseAll(ctx context.Context, leases []backend.Lease) error {
	if len(leases) == 0 {
		return nil
	}
	calls := make([]redisproto.Call, len(leases))
	for i, l := range leases {
		h, _, err := d.holdOf(l)
		if err != nil {
			return err
		}
		calls[i] = redisproto.Call{Keys: h.relKeys[:], Args: d.releaseArgs(l.Owner, h)}
	}
	ctx, cancel := context.WithTimeout(ctx, redisrt.CleanupTimeout)
	defer cancel()
	var errs []error
	_, err := d.run.Call(ctx, func(ctx context.Context) error {
		cmds, _ := redisproto.RunScripts(ctx, d.client, redisproto.ReleaseScript, calls, nil)
		for _, cmd := range cmds {
			if err := cmd.Err(); err != nil {
				errs = append(errs, err)
			}
		}
		return nil
	})
	d.reload.NoAnswer(err)
	if err != nil {
		return err // given up on: errs may still be written
	}
	return errors.Join(errs...)
}

// HandOff runs the handoff script: from's count taken and, when that frees
// the key, the key granted to next.Owner with a new token in the same
// step, one round trip instead of a release, a notification and an
// acquire. An error leaves the outcome unknown; a call given up on is
// waited for by from's next Release.
func (d *Driver) HandOff(ctx context.Context, from backend.Lease, next backend.Attempt) (int64, backend.Grant, error) {
	h, own, err := d.holdOf(from)
	if err != nil {
		return 0, backend.Grant{}, err
	}
	if err := d.afterAbandoned(ctx, h, own, from.Owner); err != nil {
		return 0, backend.Grant{}, err
	}
	var vals []int64
	pending, err := d.run.Call(ctx, func(ctx context.Context) error {
		v, err := redisproto.HandoffScript.Run(ctx, d.client, h.relKeys[:1], from.Owner, h.tokenStr,
			next.Owner, next.TTL.Milliseconds(), d.keyTTL(next.TTL)).Int64Slice()
		if err == nil && len(v) != 2 {
			err = errUnexpectedHandoff
		}
		vals = v
		return err
	})
	d.reload.NoAnswer(err)
	if pending != nil {
		d.abandonRelease(h, own, from.Owner, pending)
	}
	if err != nil {
		return 0, backend.Grant{}, err // an abandoned call may still write vals
	}
	if vals[0] != 0 {
		return vals[0], backend.Grant{}, nil
	}
	tok := vals[1]
	return 0, backend.Grant{Status: backend.Acquired, Token: tok, Handle: newHold(h.relKeys[0], h.relKeys[1], formatToken(tok), next.TTL)}, nil
}
