package etcdlock

// Watching is the number of b's watches running.
func Watching(b *Backend) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.running
}

// Streams is the number of b's watches whose stream etcd created.
func Streams(b *Backend) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.streams
}

// Compactions is the number of times one of b's watches found the revision
// it resumed from compacted, and read the key afresh.
func Compactions(b *Backend) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.compacted
}
