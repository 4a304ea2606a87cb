package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/kwal/kwal/internal/kwalerr"
	"github.com/kwal/kwal/logstore/kafka/index"
	"github.com/kwal/kwal/logstore/kafka/record"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"
)

// topicIndex is what the persisted index says about one namespace.
type topicIndex struct {
	Namespace string `json:"namespace"`
	Files     int    `json:"files"`
	Bases     int    `json:"bases"`
	Deltas    int    `json:"deltas"`
	LastSeq   uint64 `json:"last_seq"`
	Bytes     int64  `json:"bytes_on_disk"`
	From      int64  `json:"accounted_from"` // C: offsets below are not accounted (reads scan them)
	Watermark int64  `json:"watermark"`      // W: offsets [C, W) are accounted
	LogEnd    *int64 `json:"log_end,omitempty"`
	// Retention is what the topic lets the broker delete on its own
	// (namespaces list's column), when the log was looked at.
	Retention string        `json:"retention,omitempty"`
	Entries   int64         `json:"records_indexed"`
	Regions   []regionIndex `json:"regions,omitempty"`
	// Unusable are the checkpoint files the index could not load: the
	// index lost what they held (reads scan what it no longer accounts
	// for).
	Unusable []unusableFile `json:"unusable_files,omitempty"`
}

// unusableFile is a checkpoint file the index could not load.
type unusableFile struct {
	Path   string `json:"path"`
	Reason string `json:"reason"` // missing, truncated, corrupt, version or io
	Error  string `json:"error"`
}

// filesBytes sums the sizes of the named files in dir: what they take on
// disk, whether the index could use them or not.
func filesBytes(dir string, names []string) int64 {
	var n int64
	for _, name := range names {
		if fi, err := os.Stat(filepath.Join(dir, name)); err == nil {
			n += fi.Size()
		}
	}
	return n
}

// unusableFiles lists the files of ts that the index could not load.
func unusableFiles(dir string, ts index.TopicStats) []unusableFile {
	var out []unusableFile
	for _, f := range ts.LoadFailures {
		out = append(out, unusableFile{Path: filepath.Join(dir, f.File), Reason: f.Reason, Error: kwalerr.Bare(f.Err)})
	}
	return out
}

// describeUnusable says in one line which checkpoint files are unusable.
func describeUnusable(files []unusableFile) string {
	var parts []string
	for _, f := range files {
		parts = append(parts, fmt.Sprintf("%s (%s: %s)", f.Path, f.Reason, f.Error))
	}
	return strings.Join(parts, ", ")
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
	// InLogIndexed counts the region's records in the log that the index
	// should hold: in the accounted span, at or above the Obsolete point.
	// It must equal Records (only when the log was scanned).
	InLogIndexed *int64 `json:"records_in_log_indexed_span,omitempty"`
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
			Bytes: filesBytes(dir, ts.FileNames), From: ts.C, Watermark: ts.W, Entries: ts.Entries,
			Unusable: unusableFiles(dir, ts),
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
	corruptAt  []int64 // the first maxNamed offsets of the corrupt records
	marks      int64   // records holding no entry but a statement (Obsolete, prune)
	// inSpan counts, per region, the records that the index should hold
	// (see indexedSpan); nil when no span was given.
	inSpan map[uint64]int64
}

// indexedSpan says which of a namespace's offsets its index should hold: the
// accounted span [c, w), per region from its Obsolete point on.
type indexedSpan struct {
	c, w     int64
	obsolete map[uint64]int64
}

func (sp *indexedSpan) holds(region uint64, off int64) bool {
	return off >= sp.c && off < sp.w && off >= sp.obsolete[region]
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
// counts the records of each region (and, with span, of each region in the
// span the index should hold).
func scanLog(ctx context.Context, s *session, ns string, span *indexedSpan) (*logScan, error) {
	ls := &logScan{regions: map[uint64]int64{}}
	if span != nil {
		ls.inSpan = map[uint64]int64{}
	}
	var err error
	ls.start, ls.end, err = consumeTopic(ctx, s, ns, 0, func(rec *kgo.Record) bool {
		p, derr := record.Decode(rec.Key, rec.Value)
		switch {
		case derr == nil && p.Kind == record.KindMark:
			ls.marks++
		case derr == nil:
			ls.regions[p.Region]++
			if span != nil && span.holds(p.Region, rec.Offset) {
				ls.inSpan[p.Region]++
			}
		case errors.Is(derr, record.ErrNotKwal):
			ls.foreign++
		default:
			ls.corrupt++
			if len(ls.corruptAt) < maxNamed {
				ls.corruptAt = append(ls.corruptAt, rec.Offset)
			}
		}
		return true
	})
	return ls, err
}

// loadIndex loads the index checkpointed in dir without writing to it, for
// inspection through the index package's Topics and Stats. The caller
// closes it.
func loadIndex(dir string, log *slog.Logger) (*index.Collector, error) {
	g, err := index.New(index.Options{Store: index.OpenDirStoreReadOnly(dir), ReadOnly: true, Logger: log, Registerer: prometheus.NewRegistry()})
	if err != nil {
		return nil, fmt.Errorf("loading the index in %s: %w", dir, err)
	}
	return g, nil
}

// indexBytes sums the checkpoint bytes of the given topics in dir.
func indexBytes(dir string, topics []string, log *slog.Logger) (bytes int64, files int, err error) {
	g, err := loadIndex(dir, log)
	if err != nil {
		return 0, 0, err
	}
	defer func() { _ = g.Close(context.Background()) }()
	for _, t := range topics {
		if ts, ok := g.Stats(t, false); ok {
			bytes += ts.StoredBytes
			files += ts.Files
		}
	}
	return bytes, files, nil
}
