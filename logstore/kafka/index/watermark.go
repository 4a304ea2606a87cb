package index

// Watermark returns the end W of the topic's accounted span [C, W), and
// whether the topic has one. Unlike Stats it takes only the topic's state
// lock, never waiting for a checkpoint in flight: reads call it as they
// start, to compare W with the log's end.
func (g *Collector) Watermark(topic string) (int64, bool) {
	t := g.topic(topic, false)
	if t == nil {
		return 0, false
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.w, t.covered
}
