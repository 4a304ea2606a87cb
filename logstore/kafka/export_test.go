package kafka

// SetJoinHook makes the store call fn whenever a read joins a running
// pass, so that tests can start a shared pass's fetching once every read
// has joined. Set it before any read starts.
func SetJoinHook(s *LogStore, fn func()) { s.joinHook = fn }

// WaitCatchUp waits until no background catch-up of the topic's index runs
// (catchup.go).
func WaitCatchUp(s *LogStore, topic string) {
	s.mu.Lock()
	done := s.catchUps.running[topic]
	s.mu.Unlock()
	if done != nil {
		<-done
	}
}
