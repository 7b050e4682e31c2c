package redisrt

// Wanted reports whether channel ch is subscribed for a watch.
func Wanted(s *Subscriber, ch string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.chans[ch] != nil
}
