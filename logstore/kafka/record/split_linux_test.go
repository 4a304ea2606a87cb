package record

import (
	"strconv"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestSplitTooLarge: an entry longer than MaxEntrySize (its size would not
// fit the key's 32-bit size field) is refused with ErrTooLarge before any
// of it is read. The 4 GiB + 1 byte entry is an anonymous, unreserved
// mapping that is never touched, so it costs no memory.
func TestSplitTooLarge(t *testing.T) {
	if strconv.IntSize == 32 {
		t.Skip("a 32-bit address space cannot map an entry larger than MaxEntrySize")
	}
	size := uint64(MaxEntrySize) + 1 // a variable: as a constant it overflows a 32-bit int
	n := int(size)
	data, err := syscall.Mmap(-1, 0, n, syscall.PROT_READ, syscall.MAP_PRIVATE|syscall.MAP_ANON|syscall.MAP_NORESERVE)
	if err != nil {
		t.Skipf("cannot map %d bytes: %v", n, err)
	}
	defer func() { assert.NoError(t, syscall.Munmap(data)) }()

	parts, err := Split(1, data, 1<<20)
	assert.ErrorIs(t, err, ErrTooLarge)
	assert.Nil(t, parts)
}
