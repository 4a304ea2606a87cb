package main

import (
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestReadmeShowsTheExample keeps the README's "Using it" the code that
// the suite compiles and runs (Example_usingIt, whose output is checked):
// the README's Go block is the example file from its imports on.
func TestReadmeShowsTheExample(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	require.NoError(t, err)
	ex, err := os.ReadFile("readme_example_test.go")
	require.NoError(t, err)
	section := string(readme)
	start := strings.Index(section, "## Using it\n")
	require.GreaterOrEqual(t, start, 0, "README has a \"Using it\" section")
	section = section[start:]
	block := section[strings.Index(section, "```go\n")+len("```go\n"):]
	block = block[:strings.Index(block, "```")]
	code := string(ex)
	code = code[strings.Index(code, "import ("):]
	require.Equal(t, strings.TrimSpace(code), strings.TrimSpace(block), "update README.md's \"Using it\" from cmd/kwal/readme_example_test.go")
	for _, must := range []string{"logstore.EntryID", "logstore.RegionID", "context.WithTimeout", "apply :=", "store.Prune(ctx", "embedded.Start", "hides nothing from reads"} {
		require.Contains(t, block, must)
	}
}
