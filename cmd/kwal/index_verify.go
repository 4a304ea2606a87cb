package main

import (
	"context"
	"fmt"
	"hash/crc32"
	"log/slog"
	"strings"
	"time"

	"github.com/kwal/kwal/logstore"
	"github.com/kwal/kwal/logstore/kafka"
	"github.com/spf13/cobra"
)

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
kwal's or fail their checksum are counted and skipped by both reads; kwal
records that fail their checksum are named, and also make it exit with 2 (the
log lost what they held). So do checkpoint files the index cannot load (a
failed CRC, a truncated file), which are named, even when the reads agree
(they scan what the index lost).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if ns == "" {
				return requiredFlag(cmd, "namespace")
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
	ls, err := scanLog(ctx, s, ns, nil)
	if err != nil {
		return err
	}
	unusable, err := indexDamage(s.cfg.IndexDir, ns)
	if err != nil {
		return err
	}
	regions := ls.regionList()
	w := a.stdout
	fmt.Fprintf(w, "namespace %s: offsets [%d, %d), %d regions, %d foreign and %d undecodable records, %d marks\n",
		ns, ls.start, ls.end, len(regions), ls.foreign, ls.corrupt, ls.marks)
	// Both reads start at the log's first ID: below it the entries were
	// pruned (ID 0 would mean none).
	first := logstore.EntryID(ls.start + 1)
	if len(regions) == 0 && len(unusable) == 0 {
		fmt.Fprintln(w, "nothing to verify")
		return nil
	}

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
	// Every finding is printed, then the command fails naming them all.
	var findings []string
	// The reads skip (SkipCorrupt) but count offsets missing from the log:
	// gaps between its records, or records the index knew of past its end.
	if idxStats.Missing+scanStats.Missing > 0 {
		fmt.Fprintf(w, "MISSING: offsets that should hold records are missing from the log (counted by the indexed reads: %d, by the full scan: %d; log end %d; the errors logged above name them): their entries are lost\n",
			idxStats.Missing, scanStats.Missing, ls.end)
		findings = append(findings, "records are missing from the log")
	}
	if bad > 0 {
		findings = append(findings, fmt.Sprintf("%d of %d regions differ", bad, len(regions)))
	}
	if len(findings) == 0 {
		fmt.Fprintf(w, "OK: for every region, the indexed read equals the full scan (%d entries)\n", entries)
	}
	if ls.corrupt > 0 {
		// Both reads skipped them alike, so the index is not at fault; but
		// the log is: a kwal record that fails its checksum held (part of)
		// some region's entry, and no read returns it.
		fmt.Fprintf(w, "DAMAGED: %d kwal record(s) fail their checksum or do not decode, at offset(s) %s: the entries they held are lost\n",
			ls.corrupt, namedOffsets(ls.corruptAt, ls.corrupt))
		findings = append(findings, "the log is damaged")
	}
	// A damaged index is a finding even when the reads are right: they
	// scanned what it lost.
	if len(unusable) > 0 {
		fmt.Fprintf(w, "DAMAGED INDEX: unusable checkpoint file(s) %s: the index lost what they held (the indexed reads above scanned the offsets it no longer accounts for)\n",
			describeUnusable(unusable))
		findings = append(findings, "the index is damaged (unusable checkpoint files)")
	}
	if len(findings) > 0 {
		return mismatchError("index verify %s: %s", ns, strings.Join(findings, "; "))
	}
	return nil
}

// indexDamage returns the namespace's checkpoint files in dir that the
// index cannot load. The store logs them too; this load is quiet.
func indexDamage(dir, ns string) ([]unusableFile, error) {
	g, err := loadIndex(dir, slog.New(slog.DiscardHandler))
	if err != nil {
		return nil, err
	}
	defer func() { _ = g.Close(context.Background()) }()
	ts, ok := g.Stats(ns, false)
	if !ok {
		return nil, nil
	}
	return unusableFiles(dir, ts), nil
}
