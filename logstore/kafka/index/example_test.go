package index_test

import (
	"context"
	"fmt"
	"os"

	"github.com/kwal/kwal/logstore/kafka/index"
)

func Example() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "kwal-index")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	store, err := index.NewDirStore(dir)
	if err != nil {
		panic(err)
	}

	g, err := index.New(index.Options{Store: store, MergeGap: -1})
	if err != nil {
		panic(err)
	}
	// The producer opens the topic (empty so far) and reports acknowledged
	// appends; here regions 1 and 2 alternate in runs of 3 records.
	g.Start("wal_1", 0, 0)
	for i := range int64(4) {
		g.Observe("wal_1", []index.Run{{Start: i * 3, Count: 3, Region: uint64(1 + i%2)}})
	}
	if err := g.Close(ctx); err != nil { // writes a checkpoint
		panic(err)
	}

	// After a restart, region 2 replays from offset 0 up to the log end 15:
	// its two runs, then the unaccounted tail as a scan.
	g, err = index.New(index.Options{Store: store, MergeGap: -1})
	if err != nil {
		panic(err)
	}
	defer g.Close(ctx)
	g.Start("wal_1", 0, 15)
	for _, r := range g.Plan("wal_1", map[uint64]int64{2: 0}, 15).Ranges {
		fmt.Printf("[%d, %d) scan=%v\n", r.Start, r.End, r.Scan)
	}
	// Output:
	// [3, 6) scan=false
	// [9, 15) scan=true
}
