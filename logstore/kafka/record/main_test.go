package record

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests if any of them leaves a goroutine
// behind. The codec and the assembler are synchronous: none of their calls
// may start a goroutine that outlives it.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
