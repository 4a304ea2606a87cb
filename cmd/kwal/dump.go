package main

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kwal/kwal/internal/kwalerr"
	"github.com/kwal/kwal/internal/rawlog"
	"github.com/kwal/kwal/logstore/kafka"
	"github.com/kwal/kwal/logstore/kafka/record"
)

func (a *app) dumpCmd() *cobra.Command {
	var (
		ns     string
		from   uint64
		limit  int64
		asJSON bool
	)
	cmd := &cobra.Command{
		Use:   "dump --namespace NS [--from ID] [--limit N] [--json]",
		Short: "Decode every record of a namespace with a raw Kafka consumer",
		Long: `dump reads a namespace's topic (partition 0) with a plain franz-go consumer,
from entry ID --from (offset ID-1; 0 reads from the start), and decodes every
record: offset, entry ID (offset+1), region, part kind and seq, the entry's
size, the record value's size, and whether its checksum holds or why it does
not decode. Records written by other programs are flagged FOREIGN. It reads
up to the log end as it was when dump started.

It then reports what it can tell of damage: kwal records that fail their
checksum or do not decode (DAMAGED, with their offsets), offsets that hold no
record between the dump's start and the log's end (MISSING; transaction
markers fill their offsets), and a log that ends below the offsets the index
in --index-dir accounted for (MISSING). Any of these makes dump exit with
status 2, after dumping every record. A log start that no prune mark vouches
for (retention deleted past every prune point) is reported as UNVOUCHED,
without changing the exit status.

--json prints one JSON object per record, one per line; the report then goes
to stderr.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if ns == "" {
				return requiredFlag(cmd, "namespace")
			}
			return a.runDump(cmd.Context(), ns, from, limit, asJSON)
		},
	}
	f := cmd.Flags()
	f.StringVarP(&ns, "namespace", "n", "", "namespace (topic) to dump (required)")
	f.Uint64Var(&from, "from", 0, "first entry ID (offset ID-1); 0 starts at the beginning")
	f.Int64Var(&limit, "limit", 0, "stop after this many records (0: no limit)")
	f.BoolVar(&asJSON, "json", false, "print one JSON object per line")
	a.bound(f, "from", 0, math.MaxInt64, "Kafka offsets are signed 64-bit numbers")
	a.bound(f, "limit", 0, math.MaxInt64, "")
	return cmd
}

// dumpRecord is one decoded record (the --json line).
type dumpRecord struct {
	Offset     int64   `json:"offset"`
	ID         uint64  `json:"id"`
	Timestamp  string  `json:"timestamp"`
	KeySize    int     `json:"key_size"`
	ValueSize  int     `json:"value_size"`
	Region     *uint64 `json:"region,omitempty"`
	Epoch      uint64  `json:"epoch,omitempty"` // the writer's owner epoch (0: never claimed)
	Kind       string  `json:"kind,omitempty"`
	Seq        *uint32 `json:"seq,omitempty"`
	EntrySize  *uint32 `json:"entry_size,omitempty"`
	ChecksumOK bool    `json:"checksum_ok"`
	Foreign    bool    `json:"foreign"`
	Error      string  `json:"error,omitempty"`
}

// decodeRecord decodes one record for display. A kwal key whose checksum
// fails still shows its header fields (read from the documented layout).
func decodeRecord(rec *kgo.Record) dumpRecord {
	d := dumpRecord{
		Offset: rec.Offset, ID: uint64(rec.Offset) + 1, Timestamp: rec.Timestamp.UTC().Format(time.RFC3339Nano),
		KeySize: len(rec.Key), ValueSize: len(rec.Value),
	}
	p, err := record.Decode(rec.Key, rec.Value)
	if err == nil {
		region, seq, size := p.Region, p.Seq, p.Size
		d.Region, d.Kind, d.Seq, d.EntrySize, d.ChecksumOK = &region, p.Kind.String(), &seq, &size, true
		d.Epoch = p.Epoch
		return d
	}
	d.Error = kwalerr.Bare(err) // a part of the line, without its "kwal: "
	if errors.Is(err, record.ErrNotKwal) {
		d.Foreign = true
		return d
	}
	if k := rec.Key; record.IsKwal(k) && ((len(k) == record.KeySize && k[2] == 1) || (len(k) == record.KeySizeEpoch && k[2] == 2)) {
		region := binary.BigEndian.Uint64(k[4:12])
		f := k[12:]
		if k[2] == 2 {
			d.Epoch, f = binary.BigEndian.Uint64(k[12:20]), k[20:]
		}
		seq := binary.BigEndian.Uint32(f[0:4])
		size := binary.BigEndian.Uint32(f[4:8])
		d.Region, d.Kind, d.Seq, d.EntrySize = &region, record.Kind(k[3]).String(), &seq, &size
	}
	return d
}

func (a *app) runDump(ctx context.Context, ns string, from uint64, limit int64, asJSON bool) error {
	s, err := a.startSession()
	if err != nil {
		return err
	}
	defer s.Close()
	start := int64(0)
	if from > 0 {
		start = int64(from - 1)
	}
	w := a.stdout
	header := func() {
		fmt.Fprintf(w, "%10s %10s %10s %-7s %5s %10s %10s  %s\n", "OFFSET", "ID", "REGION", "KIND", "SEQ", "ENTRY", "VALUE", "CHECK")
	}
	var n, kwalN, foreign, corrupt int64
	var encErr error
	limited := false
	checks := newDumpChecks()
	enc := json.NewEncoder(w)
	// Control records (transaction markers) are kept so that every offset
	// is accounted for (dump_damage.go); they are not printed.
	first, end, err := consumeTopicWith(ctx, s, ns, start, []kgo.Opt{kgo.KeepControlRecords()}, func(rec *kgo.Record) bool {
		if rec.Attrs.IsControl() {
			checks.controlRecord(rec)
			return true
		}
		if limit > 0 && n >= limit {
			limited = true
			return false
		}
		d := decodeRecord(rec)
		checks.record(rec, d)
		if n == 0 && !asJSON {
			header() // once connected and reading: a failed dump prints only its error
		}
		n++
		switch {
		case d.ChecksumOK:
			kwalN++
		case d.Foreign:
			foreign++
		default:
			corrupt++
		}
		if asJSON {
			if encErr = enc.Encode(d); encErr != nil {
				return false
			}
		} else {
			region, kind, seq, size := "-", "-", "-", "-"
			if d.Region != nil {
				region, kind, seq, size = fmt.Sprint(*d.Region), d.Kind, fmt.Sprint(*d.Seq), fmt.Sprint(*d.EntrySize)
			}
			check := "ok"
			switch {
			case d.Foreign:
				check = "FOREIGN (not written by kwal): " + d.Error
			case !d.ChecksumOK:
				check = "BAD: " + d.Error
			}
			fmt.Fprintf(w, "%10d %10d %10s %-7s %5s %10s %10d  %s\n", d.Offset, d.ID, region, kind, seq, size, d.ValueSize, check)
		}
		return true
	})
	if err != nil {
		return err
	}
	if encErr != nil {
		return encErr
	}
	if start < first && !asJSON {
		fmt.Fprintf(a.stderr, "dump: offsets below %d were deleted; started at ID %d\n", first, first+1)
	}
	if !asJSON {
		markers := ""
		if checks.control > 0 {
			markers = fmt.Sprintf(", %d transaction markers", checks.control)
		}
		fmt.Fprintf(w, "%d records (%d kwal, %d foreign, %d undecodable%s); log offsets [%d, %d)\n", n, kwalN, foreign, corrupt, markers, first, end)
	}
	// What the dump can tell of damage: it read from max(start, first),
	// and to the log's end unless --limit stopped it.
	complete := !limited
	checks.finish(max(start, first), end, complete)
	indexW, indexed := a.indexWatermark(ctx, ns)
	damage, notes := checks.report(first, end, complete, start <= first, indexW, indexed)
	out := w
	if asJSON {
		out = a.stderr // stdout holds only JSON lines
	}
	for _, l := range append(damage, notes...) {
		fmt.Fprintln(out, l)
	}
	if len(damage) > 0 {
		return mismatchError("dump %s: the log is damaged (%d finding(s) above)", ns, len(damage))
	}
	return nil
}

// indexWatermark returns the end of the span the persisted index (in
// --index-dir, read only) accounted for in ns, and whether it has one.
// Without a usable index there is nothing to compare with.
func (a *app) indexWatermark(ctx context.Context, ns string) (int64, bool) {
	g, err := loadIndex(a.indexDir(), a.log)
	if err != nil {
		a.log.Debug("dump: no index to compare the log with", "err", err)
		return 0, false
	}
	defer func() { _ = g.Close(ctx) }()
	return g.Watermark(ns)
}

// consumeTopic reads partition 0 of topic from offset from (or the log
// start, when higher) up to the log end as it was when it started, with a
// plain franz-go consumer (rawlog), and hands every record to fn until fn
// returns false. It returns the log's start and end offsets.
func consumeTopic(ctx context.Context, s *session, topic string, from int64, fn func(*kgo.Record) bool) (start, end int64, err error) {
	return consumeTopicWith(ctx, s, topic, from, nil, fn)
}

// consumeTopicWith is consumeTopic with extra client options.
func consumeTopicWith(ctx context.Context, s *session, topic string, from int64, extra []kgo.Opt, fn func(*kgo.Record) bool) (start, end int64, err error) {
	cl, err := s.rawClient(ctx, append([]kgo.Opt{
		kgo.FetchMaxBytes(max(s.cfg.FetchMaxBytes, 1<<20)),
		kgo.FetchMaxPartitionBytes(max(s.cfg.FetchMaxBytes, 1<<20)),
		kgo.FetchMaxWait(250 * time.Millisecond),
	}, extra...)...)
	if err != nil {
		return 0, 0, err
	}
	defer cl.Close()
	start, end, err = rawlog.Consume(ctx, cl, topic, from, s.cfg.RequestTimeout, fn)
	if errors.Is(err, rawlog.ErrUnknownTopic) {
		err = fmt.Errorf("namespace %q: %w", topic, kafka.ErrUnknownNamespace)
	}
	return start, end, err
}
