package chaos_test

import (
	"iter"
	"os"
	"testing"

	"go.uber.org/goleak"

	"github.com/kwal/kwal/logstore"
)

func TestMain(m *testing.M) {
	if os.Getenv(crashChildEnv) != "" {
		crashChild() // TestClientCrash's child process: appends until killed
	}
	goleak.VerifyTestMain(m)
}

type iterSeq = iter.Seq2[logstore.Entry, error]
