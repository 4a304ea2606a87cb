package bench

import (
	"context"
	"hash/crc32"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestCPUByLabelFollowsGoroutines protects the matrix's client-only CPU: the
// CPU of a goroutine started under a side's label is counted for that side
// (labels are inherited), and nothing is counted for a side that did not
// run. A window whose profile caught no sample of the spin is tried again,
// up to 100 times.
func TestCPUByLabelFollowsGoroutines(t *testing.T) {
	for range 100 {
		p, err := startCPUProfile("")
		require.NoError(t, err)
		var wg sync.WaitGroup
		WithLabel(context.Background(), LabelKwal, func(context.Context) {
			wg.Add(1)
			go func() { // a child: it inherits the label
				defer wg.Done()
				buf := make([]byte, 64<<10)
				for range 2000 {
					buf[0] = byte(crc32.ChecksumIEEE(buf))
				}
			}()
		})
		wg.Wait()
		got, err := p.stop()
		require.NoError(t, err)
		require.Zero(t, got[LabelRaw], "no goroutine of the raw side ran")
		if got[LabelKwal] > 0 {
			require.LessOrEqual(t, got[LabelKwal], got.total())
			return
		}
	}
	t.Fatal("100 profiled windows of labeled work held no sample of it")
}
