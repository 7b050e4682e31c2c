package redisfence

// SkipFenceWatch is the mutation of Do's atomic step: f stops WATCHing the
// fence key, so a writer that read the fence before a higher token was
// recorded can still commit behind it (when no key it WATCHes changed).
// TestMutationIsCaught shows that the concurrency test catches it. It
// applies to a *redis.Client (on a Cluster, a write that names no keys
// would have nothing to route by).
func SkipFenceWatch(f *Fence) { f.mutation.skipFenceWatch = true }

// Slot is the Cluster hash slot Do computes for key.
func Slot(key string) int { return slot(key) }
