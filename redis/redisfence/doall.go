package redisfence

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/redfence/redfence/fenced/fence"
)

// A Claim is one resource a DoAll is fenced on, and the token the caller
// holds for it (the token of its lock on that resource). It is package
// fence's type, fenced.Claim too.
type Claim = fence.Claim

// DoAll is Do fenced on several resources at once: it applies fn's writes
// only if no claim's token is lower than the highest recorded for its
// resource, and records every claim's token with them, in one MULTI/EXEC.
//
// DoAll WATCHes every claimed resource's fence key and keys, reads the
// fences, and on the first claim, sorted by resource (as bytes), whose
// token is lower than its resource's highest returns the *StaleTokenError
// a Do with that claim alone would (errors.Is ErrStaleToken), naming that
// resource, without calling fn; nothing is applied and no token recorded.
// Otherwise it calls fn as Do does and sends MULTI, fn's commands, a SET
// per fence key that needs one (see Do), and EXEC, which applies them all
// or, when a WATCHed key changed, none: the check and the recording of
// every token are one atomic step. A lost race is retried as in Do. Redis
// takes no locks here, so the order of the claims costs no deadlock; they
// are sorted and deduplicated all the same, as every fenced store does.
//
// Hash slots: each key in keys must share the slot of one claimed
// resource's fence key (put that resource's Tag in it), on every
// deployment. A MULTI runs in one slot, so on a client that routes by key
// (a *redis.ClusterClient, or any Watcher that is not a *redis.Client)
// every claimed resource's fence key must share one slot too; as a
// resource's fence key is in the slot of the resource itself (Tag),
// distinct resources rarely do. DoAll refuses resources in two slots there
// with ErrInvalid, naming them, before any round trip. A standalone server
// or a Sentinel primary (a *redis.Client) has no slots, and takes any
// resources together.
//
// Before any round trip, DoAll returns an error matching ErrInvalid for
// everything Do refuses, for no claims, and for one resource claimed with
// two different tokens; a resource claimed twice with one token counts
// once. Everything else (fn, its errors and panics, retries, ErrContended,
// Redis's errors, deadlines) is as for Do.
func (f *Fence) DoAll(ctx context.Context, claims []Claim, keys []string,
	fn func(ctx context.Context, tx *redis.Tx, pipe redis.Pipeliner) error) error {
	claims, err := fence.UsableAll(ctx, "Fence", f == nil, f != nil && f.client != nil, claims)
	if err != nil {
		return err
	}
	if fn == nil {
		return invalid("nil fn")
	}
	w := write{claims: claims, fences: make([]string, len(claims)), keys: keys, fn: fn}
	for i, c := range claims {
		w.fences[i] = fenceKey(f.cfg.prefix, c.Resource)
	}
	if err := f.slotsOf(&w); err != nil {
		return err
	}
	return f.run(ctx, &w)
}

// slotsOf checks w's fence keys and keys against the slot rules of DoAll.
func (f *Fence) slotsOf(w *write) error {
	slots := make([]int, len(w.fences))
	for i, k := range w.fences {
		slots[i] = slot(k)
		if !f.oneTrip && slots[i] != slots[0] {
			return invalid("resources %q and %q have their fences in slots %d and %d: over a client that routes by key (a Cluster), one MULTI runs in one slot",
				clip(w.claims[0].Resource), clip(w.claims[i].Resource), slots[0], slots[i])
		}
	}
	for _, k := range w.keys {
		if s := slot(k); !slices.Contains(slots, s) {
			return invalid("key %q hashes to slot %d, the fence of no claimed resource does: put the Tag of its resource in the key",
				clip(k), s)
		}
	}
	return nil
}

// tokens names w's tokens in errors: "token 5", or "tokens 5, 7".
func (w *write) tokens() string {
	if len(w.claims) == 1 {
		return fmt.Sprintf("token %d", w.claims[0].Token)
	}
	toks := make([]string, len(w.claims))
	for i, c := range w.claims {
		toks[i] = strconv.FormatInt(c.Token, 10)
	}
	return "tokens " + strings.Join(toks, ", ")
}
