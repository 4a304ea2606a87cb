package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/kwal/kwal/logstore/kafka"
	"github.com/spf13/cobra"
)

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
last offset, and the Obsolete point (the offset below which the region dropped
its records) when it has one. Every position is a Kafka offset, as kwal dump
prints them: an entry's ID, as kwal replay prints it, is the offset of its
first record + 1.

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
	// pflag prints a list's empty default as "(default [])" after the
	// usage's own default.
	f.Lookup("regions").DefValue = ""
	f.BoolVar(&noScan, "no-scan", false, "do not scan the log (no broker needed); regions come from the index")
	f.BoolVar(&asJSON, "json", false, "print one JSON object per namespace")
	f.IntVar(&maxShown, "max-regions", 1000, "print at most this many regions per namespace (0: all)")
	a.bound(f, "regions", anyValue.min, anyValue.max, "")
	a.bound(f, "max-regions", 0, math.MaxInt32, "")
	return cmd
}

func (a *app) runIndexShow(ctx context.Context, ns string, regions []uint, noScan, asJSON bool, maxShown int) error {
	dir := a.indexDir()
	g, err := loadIndex(dir, a.log)
	if err != nil {
		return err
	}
	var topics []string
	indexed := g.Topics()
	spans := map[string]*indexedSpan{}
	for _, t := range indexed {
		if ts, ok := g.Stats(t, true); ok && ts.Covered {
			sp := &indexedSpan{c: ts.C, w: ts.W, obsolete: map[uint64]int64{}}
			for _, rs := range ts.Regions {
				sp.obsolete[rs.Region] = rs.ObsoleteBelow
			}
			spans[t] = sp
		}
	}
	_ = g.Close(ctx)
	hasIndex := true
	if ns != "" {
		topics = []string{ns}
		hasIndex = slices.Contains(indexed, ns)
		if !hasIndex && noScan {
			return fmt.Errorf("namespace %s has no index in %s (with --no-scan its log was not looked at)", ns, dir)
		}
	} else {
		topics = indexed
	}
	if len(topics) == 0 {
		fmt.Fprintf(a.stdout, "no index checkpoints in %s\n", dir)
		return nil
	}
	want := map[string][]uint64{}
	scans := map[string]*logScan{}
	retention := map[string]string{}
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
		// A store without the index (the index in --index-dir stays as it
		// is) asks the broker for each topic's retention.
		st, err := s.openStore(ctx, func(c *kafka.Config) { c.DisableIndex = true })
		if err != nil {
			return err
		}
		defer func() { _ = st.Close() }()
		for _, t := range topics {
			ls, err := scanLog(ctx, s, t, spans[t])
			if err != nil {
				if !errors.Is(err, kafka.ErrUnknownNamespace) {
					return err
				}
				if !hasIndex {
					return fmt.Errorf("no namespace %s: no such topic, and no index of it in %s", t, dir)
				}
				fmt.Fprintf(a.stderr, "kwal: namespace %s has an index in %s but no topic (deleted by other means? kwal namespaces delete %s removes the index)\n", t, dir, t)
				continue
			}
			if !hasIndex {
				fmt.Fprintf(a.stdout, "namespace %s\n  no index in %s yet: its log holds offsets [%d, %d), with records of %d region(s); a store that appends to it or reads it builds the index\n",
					t, dir, ls.start, ls.end, len(ls.regions))
				return nil
			}
			scans[t] = ls
			want[t] = ls.regionList()
			retention[t] = retentionText(ctx, st, t)
		}
	}
	infos, err := inspectIndex(dir, topics, want, a.log)
	if err != nil {
		return err
	}
	disagree, damaged := 0, 0
	for i := range infos {
		ti := &infos[i]
		if ls := scans[ti.Namespace]; ls != nil {
			end := ls.end
			ti.LogEnd = &end
			ti.Retention = retention[ti.Namespace]
			for j := range ti.Regions {
				n := ls.regions[ti.Regions[j].Region]
				ti.Regions[j].InLog = &n
				if ls.inSpan != nil {
					k := ls.inSpan[ti.Regions[j].Region]
					ti.Regions[j].InLogIndexed = &k
				}
			}
			if ti.disagrees() {
				disagree++
			}
		}
		if len(ti.Unusable) > 0 {
			damaged++
		}
		if asJSON {
			if err := json.NewEncoder(a.stdout).Encode(ti); err != nil {
				return err
			}
			continue
		}
		a.printTopicIndex(ti, maxShown)
	}
	var findings []string
	if damaged > 0 {
		findings = append(findings, fmt.Sprintf("the index of %d of %d namespaces is damaged (unusable checkpoint files)", damaged, len(infos)))
	}
	if disagree > 0 {
		findings = append(findings, fmt.Sprintf("the index and the log disagree for %d of %d namespaces (records missing from the log, or an index that does not match it)", disagree, len(infos)))
	}
	if len(findings) > 0 {
		return mismatchError("index show: %s", strings.Join(findings, "; "))
	}
	return nil
}

// disagrees reports whether the scanned log contradicts the index: it ends
// below the watermark, or holds a different number of a region's records in
// the span the index accounts for.
func (ti *topicIndex) disagrees() bool {
	if ti.LogEnd != nil && *ti.LogEnd < ti.Watermark {
		return true
	}
	for _, r := range ti.Regions {
		if r.InLogIndexed != nil && *r.InLogIndexed != r.Records {
			return true
		}
	}
	return false
}

func (a *app) printTopicIndex(ti *topicIndex, maxShown int) {
	w := a.stdout
	fmt.Fprintf(w, "namespace %s\n", ti.Namespace)
	if ti.Files == 0 {
		fmt.Fprintf(w, "  no checkpoint files\n")
	} else {
		fmt.Fprintf(w, "  checkpoint files  %d (%d base, %d delta, last seq %d), %s on disk\n", ti.Files, ti.Bases, ti.Deltas, ti.LastSeq, humanBytes(ti.Bytes))
	}
	if len(ti.Unusable) > 0 {
		fmt.Fprintf(w, "  DAMAGED: unusable checkpoint file(s) %s: the index lost what they held, and reads scan the offsets it no longer accounts for\n",
			describeUnusable(ti.Unusable))
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
	if ti.Retention != "" {
		fmt.Fprintf(w, "  retention         %s\n", ti.Retention)
	}
	if ti.LogEnd != nil && *ti.LogEnd < ti.Watermark {
		fmt.Fprintf(w, "  MISSING: the log ends at offset %d, below the watermark %d: records the index knows of at offsets [%d, %d) are gone from the log (a truncated or damaged log, lost broker data, or a recreated topic); reads of the regions that had records there fail with ErrCorrupt\n",
			*ti.LogEnd, ti.Watermark, *ti.LogEnd, ti.Watermark)
	}
	for _, r := range ti.Regions {
		if r.InLogIndexed != nil && *r.InLogIndexed != r.Records {
			fmt.Fprintf(w, "  MISMATCH region %d: the index holds %d records in [%d, %d), the log %d\n", r.Region, r.Records, ti.From, ti.Watermark, *r.InLogIndexed)
		}
	}
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
		// The index knows records by offset, not entries by ID: a split
		// entry's records span several offsets and its ID comes from the
		// first (record.go), so a last offset + 1 need not be an ID.
		fmt.Fprintf(w, "  (Kafka offsets, as kwal dump prints them; an entry's ID, as replay prints it, is its first record's offset + 1)\n")
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintf(tw, "\tregion\trecords\tranges\tfirst offset\tlast offset\tobsolete below offset\trecords in log\t\n")
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
