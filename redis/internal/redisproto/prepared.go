package redisproto

import (
	"context"

	"github.com/redis/go-redis/v9"
)

// Prepared is a script of the uncontended Lock's two calls (acquire,
// release), run with a command its caller builds whole in one slice: Args,
// then the keys, then the arguments. go-redis's Script.Run would copy keys
// and arguments into a slice of its own, boxing the command's name, the
// hash and each key again on the way: five allocations or more per call.
// What is sent, and what hooks see in Args(), is the same EVALSHA.
type Prepared struct {
	*redis.Script
	sha any // Hash(), boxed once
}

func prepare(s *redis.Script) *Prepared { return &Prepared{Script: s, sha: s.Hash()} }

// The scripts a single deployment's Lock and Release run on every call.
var (
	AcquireCall = prepare(AcquireScript)
	ReleaseCall = prepare(ReleaseScript)
)

// Args appends to dst the head of an EVALSHA of s with nkeys keys (the
// name, the hash, nkeys); the caller appends the keys, then the arguments,
// and passes the whole to Run.
func (s *Prepared) Args(dst []any, nkeys int) []any {
	return append(dst, "evalsha", s.sha, nkeys)
}

// Run sends cmd (from Args) on c as Script.Run would: EVALSHA, then EVAL
// when the server lacks the script (NOSCRIPT). A client that is not one of
// go-redis's own types (a wrapper, whose EvalSha may be its own) gets
// Script.Run itself.
func (s *Prepared) Run(ctx context.Context, c redis.UniversalClient, cmd []any) *redis.Cmd {
	nkeys, _ := cmd[2].(int)
	switch c.(type) {
	case *redis.Client, *redis.ClusterClient, *redis.Ring:
	default:
		return s.Script.Run(ctx, c, keysOf(cmd, nkeys), cmd[3+nkeys:]...)
	}
	r := redis.NewCmd(ctx, cmd...)
	if nkeys > 0 {
		r.SetFirstKeyPos(3) // as go-redis's EvalSha: Cluster routes by the first key
	}
	_ = c.Process(ctx, r)
	if isNoScript(r.Err()) {
		return s.Eval(ctx, c, keysOf(cmd, nkeys), cmd[3+nkeys:]...)
	}
	return r
}

// keysOf is the keys of cmd, a command built with Args.
func keysOf(cmd []any, nkeys int) []string {
	keys := make([]string, nkeys)
	for i := range keys {
		keys[i], _ = cmd[3+i].(string)
	}
	return keys
}
