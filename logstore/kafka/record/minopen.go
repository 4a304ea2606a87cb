package record

// MinOpenFirst returns the lowest first offset among the entries still
// open, and whether any is. A reader that yields entries in ID order holds
// back completed entries that start after it.
func (a *Assembler) MinOpenFirst() (int64, bool) {
	var lo int64
	ok := false
	for _, pe := range a.open {
		if !ok || pe.first < lo {
			lo, ok = pe.first, true
		}
	}
	return lo, ok
}

// OpenBytes returns the data bytes the open entries hold.
func (a *Assembler) OpenBytes() int64 { return a.openBytes }

// Cut gives up the open entry with the lowest first offset as incomplete,
// for a reader that may hold no more (its parts lie close together in the
// log, so an entry still open far past its first part is incomplete). It
// returns what was dropped, and false when no entry is open. Should a later
// part of that entry turn up after all, Add fails with ErrCutShort: the
// entry was not incomplete, only longer than the reader's bound, and
// nothing may be lost silently.
func (a *Assembler) Cut() (Drop, bool) {
	var region uint64
	var oldest *pending
	for r, pe := range a.open {
		if oldest == nil || pe.first < oldest.first {
			region, oldest = r, pe
		}
	}
	if oldest == nil {
		return Drop{}, false
	}
	a.cut[region] = cutEntry{hdr: oldest.hdr, first: oldest.first}
	return a.abandon(region, oldest, oldest.last), true
}
