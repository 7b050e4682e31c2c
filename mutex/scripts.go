package mutex

import (
	_ "embed"

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

	acquireScript = redis.NewScript(acquireLua)
	releaseScript = redis.NewScript(releaseLua)
	extendScript  = redis.NewScript(extendLua)
	ttlScript     = redis.NewScript(ttlLua)
	abandonScript = redis.NewScript(abandonLua)
	raiseScript   = redis.NewScript(raiseLua)
	handoffScript = redis.NewScript(handoffLua)
)
