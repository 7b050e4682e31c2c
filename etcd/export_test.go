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
