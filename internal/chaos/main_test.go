package chaos_test

import (
	"iter"
	"os"
	"testing"

	"go.uber.org/goleak"

	"github.com/kwal/kwal/internal/chaos"
	"github.com/kwal/kwal/logstore"
)

func TestMain(m *testing.M) {
	if os.Getenv(crashChildEnv) != "" {
		crashChild() // TestClientCrash's child process: appends until killed
	}
	if chaos.IsDatanode() {
		os.Exit(chaos.DatanodeMain()) // TestRegionFailover's datanode process
	}
	// Toxiproxy v2.5.0 (testutil/netfault) can leave a toxic's pipe goroutine blocked on a send to a
	// link that closed with its connection (toxics.NoopToxic.Pipe has no exit for it); it belongs to
	// the library, holds no kwal state and is not ours to stop.
	goleak.VerifyTestMain(m, goleak.IgnoreAnyFunction("github.com/Shopify/toxiproxy/v2/toxics.(*ToxicStub).Run"))
}

type iterSeq = iter.Seq2[logstore.Entry, error]
