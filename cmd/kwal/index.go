package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"log/slog"
	"slices"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kwal/kwal/logstore"
	"github.com/kwal/kwal/logstore/kafka"
	"github.com/kwal/kwal/logstore/kafka/index"
	"github.com/kwal/kwal/logstore/kafka/record"
)

func (a *app) indexCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "index",
		Short: "Show or verify the persisted region index",
		Long: `The region index records, per namespace, which offsets hold which region's
records, so that replaying one region fetches only its own records. kwal
checkpoints it in --index-dir (default <data-dir>/index).`,
	}
	cmd.AddCommand(a.indexShowCmd(), a.indexVerifyCmd())
	return cmd
}

// ---- inspection ---------------------------------------------------------

// topicIndex is what the persisted index says about one namespace.
type topicIndex struct {
	Namespace string        `json:"namespace"`
	Files     int           `json:"files"`
	Bases     int           `json:"bases"`
	Deltas    int           `json:"deltas"`
	LastSeq   uint64        `json:"last_seq"`
	Bytes     int64         `json:"bytes_on_disk"`
	From      int64         `json:"accounted_from"` // C: offsets below are not accounted (reads scan them)
	Watermark int64         `json:"watermark"`      // W: offsets [C, W) are accounted
	LogEnd    *int64        `json:"log_end,omitempty"`
	Entries   int64         `json:"records_indexed"`
	Regions   []regionIndex `json:"regions,omitempty"`
}

// regionIndex is one region's part of a topicIndex.
type regionIndex struct {
	Region      uint64 `json:"region"`
	Records     int64  `json:"records"` // indexed offsets (entries, or parts of split entries)
	Ranges      int    `json:"ranges"`  // runs of consecutive offsets
	FirstOffset int64  `json:"first_offset"`
	LastOffset  int64  `json:"last_offset"`
	// ObsoleteBelow is the region's Obsolete point (0: none).
	ObsoleteBelow int64 `json:"obsolete_below,omitempty"`
	// InLog is the number of the region's records found in the log (only
	// when the log was scanned).
	InLog *int64 `json:"records_in_log,omitempty"`
}

// inspectIndex loads the index checkpointed in dir (read-only) and
// describes the given namespaces (all it holds when topics is nil), with
// the given regions of each (every region it indexes when regions has no
// entry for a namespace and all is set).
func inspectIndex(dir string, topics []string, regions map[string][]uint64, log *slog.Logger) ([]topicIndex, error) {
	g, err := loadIndex(dir, log)
	if err != nil {
		return nil, err
	}
	defer func() { _ = g.Close(context.Background()) }()
	if topics == nil {
		topics = g.Topics()
	}
	var out []topicIndex
	for _, t := range topics {
		ts, ok := g.Stats(t, true)
		if !ok {
			continue
		}
		ti := topicIndex{
			Namespace: t, Files: ts.Files, Deltas: ts.Deltas, Bases: ts.Files - ts.Deltas, LastSeq: ts.LastSeq,
			Bytes: ts.StoredBytes, From: ts.C, Watermark: ts.W, Entries: ts.Entries,
		}
		byRegion := map[uint64]index.RegionStats{}
		for _, rs := range ts.Regions {
			byRegion[rs.Region] = rs
		}
		want := regions[t]
		if want == nil {
			for _, rs := range ts.Regions {
				want = append(want, rs.Region)
			}
		}
		for _, r := range want {
			rs, ok := byRegion[r]
			ri := regionIndex{Region: r, FirstOffset: -1, LastOffset: -1}
			if ok {
				ri.Records, ri.Ranges, ri.FirstOffset, ri.LastOffset, ri.ObsoleteBelow = rs.Entries, rs.Runs, rs.First, rs.Last, rs.ObsoleteBelow
			}
			ti.Regions = append(ti.Regions, ri)
		}
		out = append(out, ti)
	}
	return out, nil
}

// logScan is what a scan of a namespace's log found.
type logScan struct {
	start, end int64
	regions    map[uint64]int64 // records per region
	foreign    int64
	corrupt    int64
	marks      int64 // records holding no entry but a statement (Obsolete, prune)
}

func (l *logScan) regionList() []uint64 {
	out := make([]uint64, 0, len(l.regions))
	for r := range l.regions {
		out = append(out, r)
	}
	slices.Sort(out)
	return out
}

// scanLog reads every record of the namespace with a raw consumer and
// counts the records of each region.
func scanLog(ctx context.Context, s *session, ns string) (*logScan, error) {
	ls := &logScan{regions: map[uint64]int64{}}
	var err error
	ls.start, ls.end, err = consumeTopic(ctx, s, ns, 0, func(rec *kgo.Record) bool {
		p, derr := record.Decode(rec.Key, rec.Value)
		switch {
		case derr == nil && p.Kind == record.KindMark:
			ls.marks++
		case derr == nil:
			ls.regions[p.Region]++
		case errors.Is(derr, record.ErrNotKwal):
			ls.foreign++
		default:
			ls.corrupt++
		}
		return true
	})
	return ls, err
}

// ---- index show ----------------------------------------------------------

func (a *app) indexShowCmd() *cobra.Command {
	var (
		ns       string
		regions  []uint
		noScan   bool
		asJSON   bool
		maxShown int
	)
	cmd := &cobra.Command{
		Use:   "show",
		Short: "Show the persisted index per namespace and region",
		Long: `show loads the checkpoints in --index-dir without changing them and prints,
per namespace: its checkpoint files and bytes on disk, and the accounted span
[from, watermark) of offsets the index knows; per region: the records
(offsets) indexed, in how many ranges of consecutive offsets, the first and
last, and the Obsolete point when the region dropped offsets above the span's
start.

Regions come from the index itself (or --regions); unless --no-scan, the
namespace's log is also scanned, which adds the log end and each region's
records in the log for comparison; --no-scan needs no broker. "records"
counts the offsets of whole entries and of parts of split entries.
`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return a.runIndexShow(cmd.Context(), ns, regions, noScan, asJSON, maxShown)
		},
	}
	f := cmd.Flags()
	f.StringVarP(&ns, "namespace", "n", "", "only this namespace (default: every namespace in the index)")
	f.UintSliceVar(&regions, "regions", nil, "regions to show (default: those found in the log, or in the index with --no-scan)")
	f.BoolVar(&noScan, "no-scan", false, "do not scan the log (no broker needed); regions come from the index")
	f.BoolVar(&asJSON, "json", false, "print one JSON object per namespace")
	f.IntVar(&maxShown, "max-regions", 1000, "print at most this many regions per namespace (0: all)")
	return cmd
}

func (a *app) runIndexShow(ctx context.Context, ns string, regions []uint, noScan, asJSON bool, maxShown int) error {
	dir := a.indexDir()
	g, err := loadIndex(dir, a.log)
	if err != nil {
		return err
	}
	var topics []string
	if ns != "" {
		topics = []string{ns}
	} else {
		topics = g.Topics()
	}
	_ = g.Close(ctx)
	if len(topics) == 0 {
		fmt.Fprintf(a.stdout, "no index checkpoints in %s\n", dir)
		return nil
	}
	want := map[string][]uint64{}
	scans := map[string]*logScan{}
	switch {
	case len(regions) > 0:
		for _, t := range topics {
			for _, r := range regions {
				want[t] = append(want[t], uint64(r))
			}
		}
	case !noScan:
		s, err := a.startSession()
		if err != nil {
			return err
		}
		defer s.Close()
		for _, t := range topics {
			ls, err := scanLog(ctx, s, t)
			if err != nil {
				if errors.Is(err, kafka.ErrUnknownNamespace) {
					a.log.Warn("namespace has an index but no topic", "namespace", t)
					continue
				}
				return err
			}
			scans[t] = ls
			want[t] = ls.regionList()
		}
	}
	infos, err := inspectIndex(dir, topics, want, a.log)
	if err != nil {
		return err
	}
	for i := range infos {
		ti := &infos[i]
		if ls := scans[ti.Namespace]; ls != nil {
			end := ls.end
			ti.LogEnd = &end
			for j := range ti.Regions {
				n := ls.regions[ti.Regions[j].Region]
				ti.Regions[j].InLog = &n
			}
		}
		if asJSON {
			if err := json.NewEncoder(a.stdout).Encode(ti); err != nil {
				return err
			}
			continue
		}
		a.printTopicIndex(ti, maxShown)
	}
	return nil
}

func (a *app) printTopicIndex(ti *topicIndex, maxShown int) {
	w := a.stdout
	fmt.Fprintf(w, "namespace %s\n", ti.Namespace)
	if ti.Files == 0 {
		fmt.Fprintf(w, "  no checkpoint files\n")
	} else {
		fmt.Fprintf(w, "  checkpoint files  %d (%d base, %d delta, last seq %d), %s on disk\n", ti.Files, ti.Bases, ti.Deltas, ti.LastSeq, humanBytes(ti.Bytes))
	}
	fmt.Fprintf(w, "  accounted offsets [%d, %d)", ti.From, ti.Watermark)
	if ti.LogEnd != nil {
		lag := *ti.LogEnd - ti.Watermark
		fmt.Fprintf(w, ", log end %d", *ti.LogEnd)
		if lag > 0 {
			fmt.Fprintf(w, " (%d offsets past the watermark are scanned by reads)", lag)
		}
	}
	fmt.Fprintln(w)
	var total int64
	for _, r := range ti.Regions {
		total += r.Records
	}
	if len(ti.Regions) > 0 {
		perEntry := ""
		if total > 0 {
			perEntry = fmt.Sprintf(", %.3f B/record on disk", float64(ti.Bytes)/float64(total))
		}
		fmt.Fprintf(w, "  regions           %d, %d records indexed%s\n", len(ti.Regions), total, perEntry)
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintf(tw, "\tregion\trecords\tranges\tfirst\tlast\tobsolete below\tin log\t\n")
		for i, r := range ti.Regions {
			if maxShown > 0 && i >= maxShown {
				fmt.Fprintf(tw, "\t…\t%d more\t\t\t\t\t\t\n", len(ti.Regions)-i)
				break
			}
			first, last, obs, inLog := "-", "-", "-", "-"
			if r.FirstOffset >= 0 {
				first, last = strconv.FormatInt(r.FirstOffset, 10), strconv.FormatInt(r.LastOffset, 10)
			}
			if r.ObsoleteBelow > 0 {
				obs = strconv.FormatInt(r.ObsoleteBelow, 10)
			}
			if r.InLog != nil {
				inLog = strconv.FormatInt(*r.InLog, 10)
			}
			fmt.Fprintf(tw, "\t%d\t%d\t%d\t%s\t%s\t%s\t%s\t\n", r.Region, r.Records, r.Ranges, first, last, obs, inLog)
		}
		_ = tw.Flush()
	}
	fmt.Fprintln(w)
}

// ---- index verify -------------------------------------------------------

// entrySig identifies an entry's content without keeping it.
type entrySig struct {
	id   logstore.EntryID
	size int
	crc  uint32
}

func sigOf(e logstore.Entry) entrySig {
	return entrySig{id: e.ID, size: len(e.Data), crc: crc32.Checksum(e.Data, crc32.MakeTable(crc32.Castagnoli))}
}

func (s entrySig) String() string {
	return fmt.Sprintf("ID %d (%d bytes, crc32c %08x)", s.id, s.size, s.crc)
}

// compareSigs describes the first difference between an indexed read and
// a full-scan read of one region, or returns "".
func compareSigs(indexed, scanned []entrySig) string {
	n := min(len(indexed), len(scanned))
	for i := range n {
		if indexed[i] != scanned[i] {
			return fmt.Sprintf("entry %d of the region: indexed read has %v, full scan has %v", i, indexed[i], scanned[i])
		}
	}
	switch {
	case len(indexed) < len(scanned):
		return fmt.Sprintf("indexed read returned %d entries, full scan %d: missing from %v on", len(indexed), len(scanned), scanned[n])
	case len(indexed) > len(scanned):
		return fmt.Sprintf("indexed read returned %d entries, full scan %d: extra from %v on", len(indexed), len(scanned), indexed[n])
	}
	return ""
}

func (a *app) indexVerifyCmd() *cobra.Command {
	var (
		ns      string
		verbose bool
	)
	cmd := &cobra.Command{
		Use:   "verify --namespace NS",
		Short: "Check the persisted index against the log: indexed reads must equal full scans",
		Long: `verify opens the store on the persisted index (without writing to it),
learns the namespace's regions by scanning its log, and checks, region by
region, that a read with the index returns exactly the entries a full scan
returns (IDs, sizes, CRC-32C of the data), in the same order. Differences are
reported per region and the command exits with status 2. Records that are not
kwal's or fail their checksum are counted and skipped by both reads.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if ns == "" {
				return errors.New("index verify: --namespace is required")
			}
			return a.runIndexVerify(cmd.Context(), ns, verbose)
		},
	}
	cmd.Flags().StringVarP(&ns, "namespace", "n", "", "namespace to verify (required)")
	cmd.Flags().BoolVarP(&verbose, "verbose", "v", false, "print every region's result, not only differences")
	return cmd
}

func (a *app) runIndexVerify(ctx context.Context, ns string, verbose bool) error {
	s, err := a.startSession()
	if err != nil {
		return err
	}
	defer s.Close()
	st, err := s.openStore(ctx, func(c *kafka.Config) {
		c.IndexReadOnly = true
		// Records that are not kwal's are skipped by both reads alike (the
		// index accounts for them as foreign); the scan above counts them.
		c.SkipCorrupt = true
	})
	if err != nil {
		return err
	}
	defer func() { _ = st.Close() }()
	ls, err := scanLog(ctx, s, ns)
	if err != nil {
		return err
	}
	regions := ls.regionList()
	w := a.stdout
	fmt.Fprintf(w, "namespace %s: offsets [%d, %d), %d regions, %d foreign and %d undecodable records, %d marks\n",
		ns, ls.start, ls.end, len(regions), ls.foreign, ls.corrupt, ls.marks)
	if len(regions) == 0 {
		fmt.Fprintln(w, "nothing to verify")
		return nil
	}

	// Both reads start at the log's first ID: below it the entries were
	// pruned (ID 0 would mean none).
	first := logstore.EntryID(ls.start + 1)

	// Indexed reads first, so that they use the persisted index rather
	// than what the full scan teaches the store.
	indexed := make(map[uint64][]entrySig, len(regions))
	var idxStats kafka.ReadStats
	t0 := time.Now()
	for _, r := range regions {
		var stats kafka.ReadStats
		var sigs []entrySig
		for e, err := range st.ReadWith(ctx, ns, map[logstore.RegionID]logstore.EntryID{logstore.RegionID(r): first}, kafka.ReadOptions{Stats: &stats}) {
			if err != nil {
				return fmt.Errorf("indexed read of region %d: %w", r, err)
			}
			sigs = append(sigs, sigOf(e))
		}
		indexed[r] = sigs
		addStats(&idxStats, stats)
	}
	idxTime := time.Since(t0)

	scanned := make(map[uint64][]entrySig, len(regions))
	from := make(map[logstore.RegionID]logstore.EntryID, len(regions))
	for _, r := range regions {
		from[logstore.RegionID(r)] = first
	}
	var scanStats kafka.ReadStats
	t0 = time.Now()
	for e, err := range st.ReadWith(ctx, ns, from, kafka.ReadOptions{NoIndex: true, Stats: &scanStats}) {
		if err != nil {
			return fmt.Errorf("full scan: %w", err)
		}
		scanned[uint64(e.Region)] = append(scanned[uint64(e.Region)], sigOf(e))
	}
	scanTime := time.Since(t0)

	bad := 0
	var entries int64
	for _, r := range regions {
		entries += int64(len(scanned[r]))
		if d := compareSigs(indexed[r], scanned[r]); d != "" {
			bad++
			fmt.Fprintf(w, "MISMATCH region %d: %s\n", r, d)
		} else if verbose {
			fmt.Fprintf(w, "region %d: %d entries, same\n", r, len(scanned[r]))
		}
	}
	fmt.Fprintf(w, "indexed reads: %d regions, %d entries in %v (%d fetches, %s fetched, %d indexed and %d scanned ranges)\n",
		len(regions), idxStats.Entries, roundDur(idxTime), idxStats.Fetches, humanBytes(idxStats.FetchedBytes), idxStats.IndexRanges, idxStats.ScanRanges)
	fmt.Fprintf(w, "full scan:     %d entries in %v (%d fetches, %s fetched)\n",
		scanStats.Entries, roundDur(scanTime), scanStats.Fetches, humanBytes(scanStats.FetchedBytes))
	if bad > 0 {
		return mismatchError("index verify %s: %d of %d regions differ", ns, bad, len(regions))
	}
	fmt.Fprintf(w, "OK: for every region, the indexed read equals the full scan (%d entries)\n", entries)
	return nil
}
