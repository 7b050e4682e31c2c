// Package redisproto is what redfence's Redis drivers write on the wire:
// the Lua scripts, the names of the keys and the channel beside a lock key,
// and how a pipeline of script calls survives NOSCRIPT. A single deployment
// and Redlock share it, so that both speak the same bytes; a change here is
// a change of the wire format (mutex's wire_test.go pins it).
package redisproto

import (
	"context"
	_ "embed"
	"slices"
	"strings"

	"github.com/redis/go-redis/v9"
)

// The scripts run as EVALSHA with go-redis's NOSCRIPT fallback to EVAL. Each
// compares the whole owner id (and, once acquired, the whole token) and
// changes nothing unless they match; see the headers of the .lua files.
var (
	//go:embed lua/acquire.lua
	acquireLua string
	//go:embed lua/release.lua
	releaseLua string
	//go:embed lua/extend.lua
	extendLua string
	//go:embed lua/ttl.lua
	ttlLua string
	//go:embed lua/abandon.lua
	abandonLua string
	//go:embed lua/raise.lua
	raiseLua string
	//go:embed lua/handoff.lua
	handoffLua string
	//go:embed lua/force.lua
	forceLua string
	//go:embed lua/inspect.lua
	inspectLua string
	//go:embed lua/acquire_all.lua
	acquireAllLua string
	//go:embed lua/term_append.lua
	termAppendLua string
	//go:embed lua/sem_acquire.lua
	semAcquireLua string
	//go:embed lua/sem_release.lua
	semReleaseLua string
	//go:embed lua/sem_extend.lua
	semExtendLua string
	//go:embed lua/sem_limit.lua
	semLimitLua string
	//go:embed lua/sem_inspect.lua
	semInspectLua string
	//go:embed lua/rw_reclaim.lua
	rwReclaimLua string
	//go:embed lua/rw_acquire.lua
	rwAcquireLua string
	//go:embed lua/rw_release.lua
	rwReleaseLua string
	//go:embed lua/rw_extend.lua
	rwExtendLua string
	//go:embed lua/rw_downgrade.lua
	rwDowngradeLua string
	//go:embed lua/rw_inspect.lua
	rwInspectLua string

	AcquireScript = redis.NewScript(acquireLua)
	ReleaseScript = redis.NewScript(releaseLua)
	ExtendScript  = redis.NewScript(extendLua)
	TTLScript     = redis.NewScript(ttlLua)
	AbandonScript = redis.NewScript(abandonLua)
	RaiseScript   = redis.NewScript(raiseLua)
	HandoffScript = redis.NewScript(handoffLua)
	ForceScript   = redis.NewScript(forceLua)
	InspectScript = redis.NewScript(inspectLua)
	// TermAppendScript records an election's term in its journal (TermsOf).
	TermAppendScript = redis.NewScript(termAppendLua)

	// The semaphore's scripts, over the keys of SemaphoreKeys.
	SemAcquireScript = redis.NewScript(semAcquireLua)
	SemReleaseScript = redis.NewScript(semReleaseLua)
	SemExtendScript  = redis.NewScript(semExtendLua)
	SemLimitScript   = redis.NewScript(semLimitLua)
	SemInspectScript = redis.NewScript(semInspectLua)
	// The read-write lock's scripts, over the keys of RWKeys; the writing
	// ones begin with rw_reclaim.lua.
	RWAcquireScript   = redis.NewScript(withReclaim(rwAcquireLua))
	RWReleaseScript   = redis.NewScript(withReclaim(rwReleaseLua))
	RWExtendScript    = redis.NewScript(withReclaim(rwExtendLua))
	RWDowngradeScript = redis.NewScript(withReclaim(rwDowngradeLua))
	RWInspectScript   = redis.NewScript(rwInspectLua)
	// AcquireAllScript is acquire_all.lua with acquire.lua as its function
	// acquire: one text for the acquisition of a key, alone or in a group.
	AcquireAllScript = redis.NewScript(strings.Replace(acquireAllLua, acquireMarker, acquireLua, 1))
)

// acquireMarker is the line of acquire_all.lua that acquire.lua replaces.
const acquireMarker = "--[[acquire.lua]]"

// withReclaim puts rw_reclaim.lua in place of its marker line in a read-write
// lock script: one text for what every writing script does first.
func withReclaim(lua string) string {
	return strings.Replace(lua, "--[[rw_reclaim.lua]]", rwReclaimLua, 1)
}

// Call is one call of a script: its keys and arguments.
type Call struct {
	Keys []string
	Args []any
}

// RunScripts sends one EVALSHA of s per call in a single pipelined round
// trip on c, followed by what extra adds to the pipeline (WAIT). When a
// server lacks the script (NOSCRIPT: it restarted, or SCRIPT FLUSH ran), it
// loads it and sends once more the calls that met NOSCRIPT, and extra,
// never the others: on Cluster a pipeline spans masters, and a release run
// twice would take two counts of a re-entered lock. Each command carries its
// own reply; the error is the last pipeline's. This is the one place that
// handles NOSCRIPT for pipelines; single calls use Script.Run, which does
// the same for one command.
func RunScripts(ctx context.Context, c redis.UniversalClient, s *redis.Script, calls []Call, extra func(redis.Pipeliner)) ([]*redis.Cmd, error) {
	return runPipelined(ctx, c, s, false, calls, extra)
}

// RunScriptsRO is RunScripts for a script that only reads, sent as
// EVALSHA_RO: a server in CLIENT PAUSE WRITE runs it (it holds every
// EVALSHA). A server without the command (older than Redis 7, or renamed)
// gets EVALSHA, as does a client that routes reads to replicas.
func RunScriptsRO(ctx context.Context, c redis.UniversalClient, s *redis.Script, calls []Call) ([]*redis.Cmd, error) {
	if ReadsReplicas(c) {
		return runPipelined(ctx, c, s, false, calls, nil)
	}
	cmds, err := runPipelined(ctx, c, s, true, calls, nil)
	if err != nil && slices.ContainsFunc(cmds, func(cmd *redis.Cmd) bool { return redis.HasErrorPrefix(cmd.Err(), "unknown command") }) {
		return runPipelined(ctx, c, s, false, calls, nil)
	}
	return cmds, err
}

// ReadsReplicas reports whether c sends read-only commands to replicas (a
// Cluster client with ReadOnly or a route option): there a lock a replica
// has not synced yet would read as free, so inspection sends EVALSHA, which
// goes to the key's master.
func ReadsReplicas(c redis.UniversalClient) bool {
	cc, ok := c.(*redis.ClusterClient)
	if !ok {
		return false
	}
	o := cc.Options()
	return o.ReadOnly || o.RouteByLatency || o.RouteRandomly
}

func runPipelined(ctx context.Context, c redis.UniversalClient, s *redis.Script, ro bool, calls []Call, extra func(redis.Pipeliner)) ([]*redis.Cmd, error) {
	evalSha := s.EvalSha
	if ro {
		evalSha = s.EvalShaRO
	}
	cmds := make([]*redis.Cmd, len(calls))
	send := func(which []int) error {
		pipe := c.Pipeline()
		for _, i := range which {
			cmds[i] = evalSha(ctx, pipe, calls[i].Keys, calls[i].Args...)
		}
		if extra != nil {
			extra(pipe)
		}
		_, err := pipe.Exec(ctx)
		return err
	}
	all := make([]int, len(calls))
	for i := range all {
		all[i] = i
	}
	err := send(all)
	var again []int
	for i, cmd := range cmds {
		if isNoScript(cmd.Err()) {
			again = append(again, i)
		}
	}
	if err == nil || len(again) == 0 {
		return cmds, err
	}
	if err := s.Load(ctx, c).Err(); err != nil {
		return cmds, err
	}
	return cmds, send(again)
}

// ReplyInts reads each command's integer reply, -1 for one that failed
// (its outcome is unknown).
func ReplyInts(cmds []*redis.Cmd) []int64 {
	vals := make([]int64, len(cmds))
	for i, c := range cmds {
		v, err := c.Int64()
		if err != nil {
			v = -1
		}
		vals[i] = v
	}
	return vals
}

func isNoScript(err error) bool {
	return err != nil && redis.HasErrorPrefix(err, "NOSCRIPT")
}
