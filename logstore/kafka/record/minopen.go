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
