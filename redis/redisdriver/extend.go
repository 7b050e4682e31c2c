package redisdriver

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redfence/redfence/mutex/backend"
	"github.com/redfence/redfence/redis/internal/redisproto"
)

// Extend sends the extensions in one pipelined round trip: one Renewal per
// lease, Renewed, Gone (owner and token no longer hold the key, or its
// lease ran out), or Unknown with the error. Replies are read only when the
// call returned: one given up on may still be running, and then every
// lease is Unknown.
func (d *Driver) Extend(ctx context.Context, leases []backend.Lease) ([]backend.Renewal, error) {
	if len(leases) == 0 {
		return nil, nil
	}
	calls, err := d.extendCalls(leases)
	if err != nil {
		return nil, err
	}
	return d.renew(ctx, redisproto.ExtendScript, calls)
}

// renew runs an extend script's calls in one pipeline: Renewed on 1, Gone
// on 0, Unknown for the rest (and for all when the call was given up on).
func (d *Driver) renew(ctx context.Context, script *redis.Script, calls []redisproto.Call) ([]backend.Renewal, error) {
	var cmds []*redis.Cmd
	var perr error
	pending, err := d.run.Call(ctx, func(ctx context.Context) error {
		cmds, perr = redisproto.RunScripts(ctx, d.client, script, calls, nil)
		return nil
	})
	results := make([]backend.Renewal, len(calls)) // Unknown
	if err != nil || pending != nil {
		d.reload.NoAnswer(err)
		return results, err
	}
	d.reload.NoAnswer(perr)
	for i, v := range redisproto.ReplyInts(cmds) {
		switch v {
		case 1:
			results[i] = backend.Renewed
		case 0:
			results[i] = backend.Gone
		}
	}
	return results, perr
}

// extendCalls are the extend script's calls for leases, each to its TTL.
func (d *Driver) extendCalls(leases []backend.Lease) ([]redisproto.Call, error) {
	calls := make([]redisproto.Call, len(leases))
	for i, l := range leases {
		h, _, err := d.holdOf(l)
		if err != nil {
			return nil, err
		}
		calls[i] = d.extendCall(l, h, l.TTL)
	}
	return calls, nil
}

func (d *Driver) extendCall(l backend.Lease, h *hold, ttl time.Duration) redisproto.Call {
	return redisproto.Call{Keys: h.relKeys[:1], Args: []any{l.Owner, h.tokenStr, ttl.Milliseconds(), d.keyTTL(ttl)}}
}

// TTL is the lease l has left as the server sees it; negative when owner
// and token do not hold the key.
func (d *Driver) TTL(ctx context.Context, l backend.Lease) (time.Duration, error) {
	h, _, err := d.holdOf(l)
	if err != nil {
		return 0, err
	}
	var us int64
	_, err = d.run.Call(ctx, func(ctx context.Context) error {
		var err error
		us, err = redisproto.TTLScript.Run(ctx, d.client, h.relKeys[:1], l.Owner, h.tokenStr).Int64()
		return err
	})
	d.reload.NoAnswer(err)
	if err != nil {
		return 0, err // us may still be written by a call given up on
	}
	return time.Duration(us) * time.Microsecond, nil
}

// AckReplicas waits up to timeout until n replicas have l's latest write
// and returns how many did. WAIT counts the writes of the connection it
// runs on, and the acquisition may have used another one: an extension of
// l (to l.TTL, or the acquisition's lease when 0) on the same pipelined
// connection first makes that connection's offset cover the acquisition.
// On Cluster both go to the key's master: a Cluster pipeline would send
// the keyless WAIT to a master of its own choosing.
// n < 0 or timeout <= 0 (WAIT would block for ever) is bad input.
func (d *Driver) AckReplicas(ctx context.Context, l backend.Lease, n int, timeout time.Duration) (int, error) {
	if n < 0 || timeout <= 0 {
		return 0, invalid("replica ack needs n >= 0 and a positive timeout, got %d, %v", n, timeout)
	}
	h, _, err := d.holdOf(l)
	if err != nil {
		return 0, err
	}
	ttl := l.TTL
	if ttl <= 0 {
		ttl = h.lease
	}
	if ttl <= 0 {
		return 0, invalid("replica ack of a lease without a TTL")
	}
	calls := []redisproto.Call{d.extendCall(l, h, ttl)}
	var acks int64
	_, err = d.run.Call(ctx, func(ctx context.Context) error {
		c, err := d.masterOf(ctx, h.lockKey())
		if err != nil {
			return err
		}
		var wait *redis.IntCmd
		_, err = redisproto.RunScripts(ctx, c, redisproto.ExtendScript, calls, func(pipe redis.Pipeliner) {
			wait = redis.NewIntCmd(ctx, "wait", n, timeout.Milliseconds())
			_ = pipe.Process(ctx, wait)
		})
		if err != nil {
			return err
		}
		acks = wait.Val()
		return nil
	})
	d.reload.NoAnswer(err)
	if err != nil {
		return 0, err
	}
	return int(acks), nil
}

// masterOf is the client a pipeline for lockKey alone goes through: on
// Cluster the key's master's, so that a keyless command in it (WAIT) runs
// on the same connection.
func (d *Driver) masterOf(ctx context.Context, lockKey string) (redis.UniversalClient, error) {
	if cc, ok := d.client.(*redis.ClusterClient); ok {
		return cc.MasterForKey(ctx, lockKey)
	}
	return d.client, nil
}
