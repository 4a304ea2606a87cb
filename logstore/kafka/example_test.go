package kafka_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/kwal/kwal/logstore"
	"github.com/kwal/kwal/logstore/kafka"
)

// A datanode opens one store, appends each write batch before applying it,
// and after a restart replays each region from its last flushed entry.
func ExampleOpen() {
	cfg := kafka.DefaultConfig()
	cfg.Brokers = []string{"127.0.0.1:9092"}
	cfg.IndexDir = "/var/lib/datanode/wal-index" // restart-safe region index
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	store, err := kafka.Open(ctx, cfg)
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()

	// Append: returns once Kafka acknowledged every entry (acks=all).
	res, err := store.AppendBatch(ctx, []logstore.Entry{
		{Namespace: "wal_0", Region: 42, Data: []byte("put k1=v1")},
		{Namespace: "wal_0", Region: 43, Data: []byte("put k2=v2")},
	})
	if err != nil {
		log.Fatal(err)
	}
	flushed := res.LastEntryIDs[42]

	// The region flushed its memtable up to flushed: the WAL may drop it.
	if err := store.Obsolete(ctx, "wal_0", 42, flushed); err != nil {
		log.Fatal(err)
	}

	// Replay: entries after the flushed one, in order, fetched through the
	// region index.
	for e, err := range store.Read(ctx, "wal_0", 42, flushed+1) {
		if err != nil {
			log.Fatal(err) // errors.Is(err, logstore.ErrPruned / ErrCorrupt) tell why
		}
		fmt.Printf("replay region %d entry %d: %q\n", e.Region, e.ID, e.Data)
	}
}
