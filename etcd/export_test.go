package etcdlock

// Watching is the number of b's watches running.
func Watching(b *Backend) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.running
}
