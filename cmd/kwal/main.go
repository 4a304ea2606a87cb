// Command kwal is the command-line companion of kwal, the write-ahead log on
// Kafka: a demo that plays a datanode, a benchmark against a raw franz-go
// producer, and tools to inspect namespaces, records, replays and the
// region index.
//
// Run `kwal --help` for the commands and flags; every flag can also be set
// from the environment as KWAL_<FLAG> (for example KWAL_BROKERS).
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	// The first signal cancels the command, which stops cleanly (closing
	// the store and the embedded broker); a second one kills it.
	go func() {
		<-ctx.Done()
		stop()
	}()
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr, os.Getenv)
	stop()
	os.Exit(code)
}
