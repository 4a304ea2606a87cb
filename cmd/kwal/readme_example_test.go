package main_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/kwal/kwal/embedded"
	"github.com/kwal/kwal/logstore"
	"github.com/kwal/kwal/logstore/kafka"
)

// Example_usingIt is the README's "Using it", compiled and run by the
// test suite (TestReadmeShowsTheExample keeps the two the same).
func Example_usingIt() {
	// An in-process Kafka for this example (package embedded; "" keeps its
	// data in memory). A datanode passes its cluster's brokers instead.
	brokers, stopBroker, err := embedded.Start("")
	if err != nil {
		log.Fatal(err)
	}
	defer stopBroker()
	indexDir, err := os.MkdirTemp("", "wal-index")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(indexDir)

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cfg := kafka.DefaultConfig()
	cfg.Brokers = brokers   // e.g. []string{"kafka-1:9092", "kafka-2:9092"}
	cfg.IndexDir = indexDir // restart-safe region index ("" = memory only)
	store, err := kafka.Open(ctx, cfg)
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()

	// Append: returns once Kafka acknowledged every entry (acks=all). A
	// namespace is a topic, created on first use; many regions share it.
	var region logstore.RegionID = 42
	res, err := store.AppendBatch(ctx, []logstore.Entry{{Namespace: "wal_0", Region: region, Data: []byte("put k1=v1")}})
	if err != nil {
		log.Fatal(err)
	}
	var flushed logstore.EntryID = res.LastEntryIDs[region] // IDs are >= 1 and grow in log order
	_, err = store.AppendBatch(ctx, []logstore.Entry{
		{Namespace: "wal_0", Region: region, Data: []byte("put k2=v2")},
		{Namespace: "wal_0", Region: 43, Data: []byte("put k3=v3")},
	})
	if err != nil {
		log.Fatal(err)
	}

	// The region flushed its memtable up to flushed: its WAL entries up to
	// there are no longer needed. Obsolete records that (for pruning); it
	// hides nothing from reads.
	if err := store.Obsolete(ctx, "wal_0", region, flushed); err != nil {
		log.Fatal(err)
	}

	// Replay after a restart: the entries after the flushed one, in order,
	// fetched through the region index.
	apply := func(e logstore.Entry) { fmt.Printf("apply entry %d of region %d: %s\n", e.ID, e.Region, e.Data) }
	for e, err := range store.Read(ctx, "wal_0", region, flushed+1) {
		if err != nil {
			log.Fatal(err) // errors.Is(err, logstore.ErrPruned), logstore.ErrCorrupt, ... say why
		}
		apply(e)
	}
	// A read from ID 1 still returns the obsolete entry: Obsolete only
	// allows Prune to delete it.
	for e, err := range store.Read(ctx, "wal_0", region, 1) {
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("from ID 1: entry %d: %s\n", e.ID, e.Data)
	}

	// Prune(ctx, namespace) (logstore.EntryID, error) deletes the records
	// no region needs any more and returns the first ID still available.
	first, err := store.Prune(ctx, "wal_0")
	if err != nil {
		log.Fatal(err) // errors.Is(err, kafka.ErrCannotPrune): nothing provably unneeded
	}
	fmt.Println("pruned: the first ID available is", first)
	for _, err := range store.Read(ctx, "wal_0", region, 1) {
		var pruned *logstore.PrunedError
		if errors.As(err, &pruned) {
			fmt.Println("from ID 1 after pruning: pruned up to", pruned.FirstAvailable)
			break
		}
	}
	// Output:
	// apply entry 2 of region 42: put k2=v2
	// from ID 1: entry 1: put k1=v1
	// from ID 1: entry 2: put k2=v2
	// pruned: the first ID available is 2
	// from ID 1 after pruning: pruned up to 2
}
