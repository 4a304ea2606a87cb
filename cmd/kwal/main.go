// Command kwal is the command-line companion of kwal, the write-ahead log on
// Kafka: a demo that plays a datanode, a benchmark against a raw franz-go
// producer, and tools to inspect namespaces, records, replays and the
// region index.
//
// Run `kwal --help` for the commands and flags; every flag can also be set
// from the environment as KWAL_<FLAG> (for example KWAL_BROKERS).
//
// The files, one job each:
//
//	main.go             signals and the exit code
//	app.go              the root command, its shared flags, exit codes
//	env.go              flags from KWAL_* environment variables
//	limits.go           the allowed range of every numeric flag
//	bytesize.go         byte-size flags with units (256MB)
//	session.go          store configuration, the embedded broker, clients
//	metrics.go          the Prometheus endpoint of demo and bench
//	format.go           sizes, durations, previews of entry data
//	workload_flags.go   the flags demo and bench share (one definition)
//	demo.go             kwal demo: flags and the run's steps
//	demo_append.go      the demo's writers and progress bar
//	demo_replay.go      the demo's checked and timed replays
//	demo_check.go       what was acknowledged, and the replay's check
//	demo_report.go      the demo's summary
//	bench.go            kwal bench: flags and the order of its phases
//	bench_run.go        the bench's phases (each a method of benchRun)
//	bench_report.go     the bench's figures, --json and table
//	bench_matrix.go     kwal bench --matrix: the layout matrix
//	bench_recovery.go   the bench's recovery phase
//	dump.go             kwal dump: records decoded by a raw consumer
//	replay.go           kwal replay: one region read as a datanode would
//	namespaces.go       kwal namespaces list|create|prune
//	namespaces_delete.go kwal namespaces delete (with its confirmation)
//	regions.go          kwal regions show|claim|release: region ownership
//	chaos.go            kwal chaos: broker-fault scenarios, the table
//	diskfree_*.go       free disk space for the demo's check, per OS
//	index.go            kwal index
//	index_inspect.go    reading checkpoints and scanning a log
//	index_show.go       kwal index show
//	index_verify.go     kwal index verify
//
// A new benchmark mode is a flag of bench.go and a phase in a file of its
// own, with its logic in internal/bench.
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
	code := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr, os.Getenv)
	stop()
	os.Exit(code)
}
