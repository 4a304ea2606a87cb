package main

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/kwal/kwal/logstore"
	"github.com/kwal/kwal/logstore/kafka"
)

type replayOpts struct {
	ns      string
	region  uint64
	from    uint64
	fromSet bool // --from given: Read's from; else the first ID held
	noIndex bool
	summary bool
	limit   int64
	preview int
	skip    bool
}

func (a *app) replayCmd() *cobra.Command {
	var o replayOpts
	cmd := &cobra.Command{
		Use:   "replay --namespace NS --region R [--from ID] [--no-index] [--summary]",
		Short: "Replay a region's entries as a datanode would",
		Long: `replay reads one region's entries with kwal (Read), as a datanode replays
its WAL after a restart: using the region index, or scanning the whole
namespace with --no-index. Without --from it starts at the first entry the log
still holds; --from ID starts at that ID exactly as Read does (so --from 0
fails with ErrPruned when a prune deleted entries of the region). It prints
every entry (ID, size, first bytes quoted or in hex), or with --summary the
counts, bytes, time, fetches and bytes fetched.

The index is loaded from --index-dir and updated with what the read learns.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if o.ns == "" {
				return requiredFlag(cmd, "namespace")
			}
			if !cmd.Flags().Changed("region") {
				return requiredFlag(cmd, "region")
			}
			o.fromSet = cmd.Flags().Changed("from")
			return a.runReplay(cmd.Context(), o)
		},
	}
	f := cmd.Flags()
	f.StringVarP(&o.ns, "namespace", "n", "", "namespace (topic) of the region (required)")
	f.Uint64VarP(&o.region, "region", "r", 0, "region ID (required)")
	f.Uint64Var(&o.from, "from", 0, "first entry ID, as Read takes it (default: the first entry the log still holds)")
	f.BoolVar(&o.noIndex, "no-index", false, "scan the whole namespace instead of using the index")
	f.BoolVar(&o.summary, "summary", false, "print counts, bytes, time and fetches instead of entries")
	f.Int64Var(&o.limit, "limit", 0, "stop after this many entries (0: no limit)")
	f.IntVar(&o.preview, "bytes", 32, "bytes of each entry's data to print")
	a.bound(f, "region", anyValue.min, anyValue.max, "")
	a.bound(f, "from", 0, math.MaxInt64, "entry IDs are Kafka offsets plus one, and offsets are signed 64-bit numbers")
	a.bound(f, "limit", 0, math.MaxInt64, "")
	a.bound(f, "bytes", 0, 64*kiB, "it is a preview (kwal dump shows whole records)")
	f.BoolVar(&o.skip, "skip-corrupt", false, "skip records that are not kwal's or fail their checksum (logged) instead of failing")
	return cmd
}

func (a *app) runReplay(ctx context.Context, o replayOpts) error {
	s, err := a.startSession()
	if err != nil {
		return err
	}
	defer s.Close()
	st, err := s.openStore(ctx, func(c *kafka.Config) { c.SkipCorrupt = o.skip })
	if err != nil {
		return err
	}
	defer func() { _ = st.Close() }()

	w := a.stdout
	var (
		stats         kafka.ReadStats
		n, nbytes     int64
		first, lastID logstore.EntryID
	)
	region := logstore.RegionID(o.region)
	from := logstore.EntryID(o.from)
	if !o.fromSet {
		if from, err = firstID(ctx, s, o.ns); err != nil {
			return err
		}
	}
	o.from = uint64(from) // what every line below reports
	// The table's header comes with its first row (or its end), so that a
	// read that fails at once prints only the error.
	header := !o.summary
	t0 := time.Now()
	for e, err := range st.ReadWith(ctx, o.ns, map[logstore.RegionID]logstore.EntryID{region: from}, kafka.ReadOptions{NoIndex: o.noIndex, Stats: &stats}) {
		if err != nil {
			return a.replayError(ctx, st, o, err)
		}
		if header {
			fmt.Fprintf(w, "%12s %10s  %s\n", "ID", "SIZE", "DATA")
			header = false
		}
		n++
		nbytes += int64(len(e.Data))
		if first == 0 {
			first = e.ID
		}
		lastID = e.ID
		if !o.summary {
			fmt.Fprintf(w, "%12d %10d  %s\n", e.ID, len(e.Data), preview(e.Data, o.preview))
		}
		if o.limit > 0 && n >= o.limit {
			break
		}
	}
	elapsed := time.Since(t0)
	var none string // why nothing came back, when nothing did
	if n == 0 {
		none = a.whyNoEntries(ctx, st, s.cfg.IndexDir, o)
	}
	var skipped string // what --skip-corrupt passed over, when it did
	if o.skip {
		skipped = s.skippedCorrupt()
	}
	if !o.summary {
		if header {
			fmt.Fprintf(w, "%12s %10s  %s\n", "ID", "SIZE", "DATA")
		}
		fmt.Fprintf(w, "%s, %s\n", plural(n, "entry", "entries"), humanBytes(nbytes))
		for _, l := range []string{none, skipped} {
			if l != "" {
				fmt.Fprintln(w, l)
			}
		}
		return st.Close()
	}
	mode := "indexed"
	if o.noIndex {
		mode = "full scan"
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "namespace\t%s\n", o.ns)
	fmt.Fprintf(tw, "region\t%d (from ID %d, %s)\n", o.region, from, mode)
	if n > 0 {
		fmt.Fprintf(tw, "entries\t%d (IDs %d..%d)\n", n, first, lastID)
	} else {
		fmt.Fprintf(tw, "entries\t0: %s\n", none)
	}
	fmt.Fprintf(tw, "bytes\t%d (%s)\n", nbytes, humanBytes(nbytes))
	fmt.Fprintf(tw, "time\t%v (%.1f MB/s)\n", roundDur(elapsed), mb(nbytes)/max(elapsed.Seconds(), 1e-9))
	fmt.Fprintf(tw, "fetches\t%d (%d indexed and %d scanned ranges)\n", stats.Fetches, stats.IndexRanges, stats.ScanRanges)
	amp := ""
	if nbytes > 0 {
		amp = fmt.Sprintf(", %.2fx the region's bytes", float64(stats.FetchedBytes)/float64(nbytes))
	}
	fmt.Fprintf(tw, "fetched\t%d bytes (%s)%s, %d records decoded\n", stats.FetchedBytes, humanBytes(stats.FetchedBytes), amp, stats.Records)
	if skipped != "" {
		fmt.Fprintf(tw, "skipped\t%s\n", skipped)
	}
	_ = tw.Flush()
	return st.Close()
}

// replayError is the one line a failed replay prints: an unknown
// namespace and a --from past the log's end said as the other commands say
// them, anything else with what was being read.
func (a *app) replayError(ctx context.Context, st *kafka.LogStore, o replayOpts, err error) error {
	switch {
	case errors.Is(err, kafka.ErrUnknownNamespace):
		return fmt.Errorf("namespace %q: %w", o.ns, kafka.ErrUnknownNamespace)
	case errors.Is(err, kafka.ErrFutureID):
		latest, lerr := st.LatestEntryID(ctx, o.ns)
		if lerr != nil {
			return fmt.Errorf("replay of region %d of %s: --from %d is past the namespace's end: %w", o.region, o.ns, o.from, err)
		}
		// latest+1 is the ID the next append gets: a read from there
		// returns nothing, above it fails.
		return fmt.Errorf("--from %d is past the end of namespace %s: its latest entry ID is %d, so it never held ID %d (replay from %d or below)",
			o.from, o.ns, latest, o.from, latest+1)
	}
	return fmt.Errorf("replay of region %d of %s: %w", o.region, o.ns, err)
}

// whyNoEntries says why a replay returned nothing: the namespace is empty,
// or which regions it does hold (those the index has seen), so that a
// region that never wrote there is not mistaken for an empty one.
func (a *app) whyNoEntries(ctx context.Context, st *kafka.LogStore, indexDir string, o replayOpts) string {
	latest, err := st.LatestEntryID(ctx, o.ns)
	if err != nil {
		return fmt.Sprintf("region %d has no entries in %s from ID %d (the namespace's last ID is unknown: %v)", o.region, o.ns, o.from, err)
	}
	if latest == 0 {
		return fmt.Sprintf("namespace %s is empty", o.ns)
	}
	msg := fmt.Sprintf("region %d has no entries in %s from ID %d; the namespace holds entries up to ID %d", o.region, o.ns, o.from, latest)
	if logstore.EntryID(o.from) > latest {
		// Only latest+1 gets here (a read from above it fails): the ID
		// the namespace's next entry gets.
		return msg + fmt.Sprintf(" (ID %d is the one its next entry gets)", o.from)
	}
	// Closing checkpoints what the read learned, so that the index on disk
	// names every region the read went past (Close is idempotent: the
	// caller's later Close returns the same result).
	_ = st.Close()
	infos, err := inspectIndex(indexDir, []string{o.ns}, nil, a.log)
	if err != nil || len(infos) == 0 {
		return msg
	}
	var regions []string
	for _, ri := range infos[0].Regions {
		if ri.Records > 0 {
			regions = append(regions, strconv.FormatUint(ri.Region, 10))
		}
	}
	switch {
	case len(regions) == 0:
		return msg
	case len(regions) > 20:
		regions = append(regions[:20], fmt.Sprintf("… (%d in all)", len(regions)))
	}
	return msg + fmt.Sprintf(", of region(s) %s as far as the index has seen", strings.Join(regions, ", "))
}

// firstID returns the first entry ID the namespace's log still holds.
func firstID(ctx context.Context, s *session, ns string) (logstore.EntryID, error) {
	cl, err := s.rawClient(ctx)
	if err != nil {
		return 0, err
	}
	defer cl.Close()
	offs, err := kadm.NewClient(cl).ListStartOffsets(ctx, ns)
	if err != nil {
		return 0, fmt.Errorf("log start of %s: %w", ns, err)
	}
	o, ok := offs.Lookup(ns, 0)
	if !ok {
		return 0, fmt.Errorf("namespace %q: %w", ns, kafka.ErrUnknownNamespace)
	}
	if errors.Is(o.Err, kerr.UnknownTopicOrPartition) {
		return 0, fmt.Errorf("namespace %q: %w", ns, kafka.ErrUnknownNamespace)
	}
	if o.Err != nil {
		return 0, fmt.Errorf("log start of %s: %w", ns, o.Err)
	}
	return logstore.EntryID(o.Offset + 1), nil
}

// skippedCorrupt says what a replay with --skip-corrupt passed over, from
// the store's metrics (kwal_read_skipped_records_total): records that are
// not kwal's, kwal records that fail their checksum (entries lost), and
// offsets missing from the log. "" when it passed over nothing, so that a
// replay that skipped data never looks like one that read everything.
func (s *session) skippedCorrupt() string {
	mfs, err := s.reg.Gather()
	if err != nil {
		return fmt.Sprintf("SKIPPED: unknown (reading the store's metrics: %v)", err)
	}
	counts := map[string]int64{}
	for _, mf := range mfs {
		if mf.GetName() != "kwal_read_skipped_records_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "kind" {
					counts[l.GetValue()] += int64(m.GetCounter().GetValue())
				}
			}
		}
	}
	corrupt, foreign, missing := counts["corrupt"], counts["foreign"], counts["missing"]
	if corrupt+foreign+missing == 0 {
		return ""
	}
	return fmt.Sprintf("SKIPPED (--skip-corrupt): %d kwal record(s) failing their checksum, %d record(s) not kwal's, %d offset(s) missing from the log (the warnings logged name them)",
		corrupt, foreign, missing)
}
