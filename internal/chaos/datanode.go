package chaos

import (
	"bufio"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/kwal/kwal/logstore"
	"github.com/kwal/kwal/logstore/kafka"
	"github.com/kwal/kwal/testutil/ledger"
)

// DatanodeEnv, when set in a process's environment, makes it a datanode of
// the region-failover scenario instead of what it normally is: the test
// binary's TestMain and kwal chaos check it first and call RunDatanode.
// Its value is the datanode's spec (JSON), written by the scenario.
const DatanodeEnv = "KWAL_CHAOS_DATANODE"

// IsDatanode reports whether this process was started as a datanode.
func IsDatanode() bool { return os.Getenv(DatanodeEnv) != "" }

// datanodeSpec is what the scenario tells a datanode process.
type datanodeSpec struct {
	Name           string        // the store's Config.Owner
	Journal        string        // the ledger journal file
	ClaimsTopic    string        // the run's claims topic
	Brokers        []string      // used when the base config names none
	Lanes          int           // writers per owned region, each waiting for its call
	Size           int           // payload bytes per entry
	Pace           time.Duration // pause between one lane's calls
	Fencing        string        // the store's Config.Fencing ("": strict)
	Lease          time.Duration // the store's Config.Lease
	ProduceTimeout time.Duration // 0: the base config's
	CallTimeout    time.Duration // every call's context deadline (a guard)
	Report         int           // acknowledged calls of a claimed region after which it says "acked"
}

// Datanode protocol: the scenario writes commands to the datanode's stdin,
// one a line; the datanode answers on stdout, one event a line (spaces
// separate fields; namespaces and owners never hold spaces).
//
//	claim NS R      → claimed NS R EPOCH SEALED NANOS   (Claim's epoch, sealed ID and latency)
//	                  then acked NS R EPOCH once Report calls of R under EPOCH were acknowledged
//	                → error claim NS R: TEXT
//	quit            → bye, after every lane stopped and the store closed
//
// Unasked: ready (the store is open), fenced NS R EPOCH (every lane of R
// under EPOCH ended with ErrFenced), error TEXT (the datanode gives up).
//
// Each owned region has Lanes writers; lane w appends one entry a call,
// tagged (R, w, EPOCH<<32 | n), so that tags are unique across processes and
// every lane's sequence rises across owners: the ledger's order check then
// spans hand-overs. A lane stops at its first ErrFenced; its calls are
// journaled (ledger.New), a fenced one with fencedMark before its error.
const fencedMark = "[fenced] "

// epochShift places the epoch above a lane's call number in a tag's Seq.
const epochShift = 32

// DatanodeMain runs this process as a datanode with kafka.DefaultConfig
// on the scenario's brokers, logging warnings to stderr, and returns its exit code.
func DatanodeMain() int {
	cfg := kafka.DefaultConfig()
	cfg.Brokers = nil // the spec's
	cfg.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	if err := RunDatanode(context.Background(), cfg, os.Getenv(DatanodeEnv), os.Stdin, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "datanode:", err)
		return 3
	}
	return 0
}

// RunDatanode runs this process as a datanode of the region-failover
// scenario on a store opened with base (its Owner, ClaimsTopic, Fencing,
// Lease and index replaced by the spec's, DatanodeEnv's value), reading commands from
// in and writing events to out until quit or the end of in.
func RunDatanode(ctx context.Context, base kafka.Config, specJSON string, in io.Reader, out io.Writer) error {
	var spec datanodeSpec
	if err := json.Unmarshal([]byte(specJSON), &spec); err != nil {
		return fmt.Errorf("%s: %w", DatanodeEnv, err)
	}
	journal, err := os.OpenFile(spec.Journal, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer journal.Close()
	cfg := base
	cfg.Owner, cfg.ClaimsTopic, cfg.Fencing, cfg.Lease = spec.Name, spec.ClaimsTopic, cmp.Or(spec.Fencing, kafka.FencingStrict), spec.Lease
	cfg.IndexDir, cfg.IndexStore = "", nil // never share another process's index
	if len(cfg.Brokers) == 0 {
		cfg.Brokers = spec.Brokers
	}
	if spec.ProduceTimeout > 0 {
		cfg.ProduceTimeout = spec.ProduceTimeout
	}
	s, err := kafka.Open(ctx, cfg)
	if err != nil {
		return err
	}
	d := &datanode{spec: spec, store: s, ledger: ledger.New(journal), out: out, quit: make(chan struct{})}
	d.ctx, d.cancel = context.WithCancel(ctx)
	defer d.cancel()
	d.say("ready")
	err = d.serve(in)
	// The calls in flight end on their own: a call cut short by quit would
	// be a failure the scenario did not cause.
	close(d.quit)
	d.lanes.Wait()
	if cerr := s.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = d.ledger.JournalErr()
	}
	if err == nil {
		d.say("bye")
	}
	return err
}

type datanode struct {
	spec   datanodeSpec
	store  *kafka.LogStore
	ledger *ledger.Ledger
	ctx    context.Context
	cancel context.CancelFunc
	quit   chan struct{} // closed by quit: each lane stops after its call
	lanes  sync.WaitGroup

	outMu sync.Mutex
	out   io.Writer
}

func (d *datanode) say(format string, args ...any) {
	d.outMu.Lock()
	defer d.outMu.Unlock()
	fmt.Fprintf(d.out, format+"\n", args...)
}

func (d *datanode) serve(in io.Reader) error {
	sc := bufio.NewScanner(in)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		switch {
		case len(f) == 1 && f[0] == "quit":
			return nil
		case len(f) == 3 && f[0] == "claim":
			r, err := strconv.ParseUint(f[2], 10, 64)
			if err != nil {
				return fmt.Errorf("command %q: %w", sc.Text(), err)
			}
			d.claim(f[1], logstore.RegionID(r))
		default:
			return fmt.Errorf("unknown command %q", sc.Text())
		}
	}
	return sc.Err()
}

// claim claims the region and starts its lanes under the new epoch.
func (d *datanode) claim(ns string, r logstore.RegionID) {
	start := time.Now()
	c, err := d.store.Claim(d.ctx, ns, r)
	took := time.Since(start)
	if err != nil {
		d.say("error claim %s %d: %s", ns, r, oneLine(err))
		return
	}
	d.say("claimed %s %d %d %d %d", ns, r, c.Epoch, c.SealedID, took.Nanoseconds())
	var mu sync.Mutex
	acked, fenced := 0, 0
	for w := range d.spec.Lanes {
		d.lanes.Add(1)
		go func() {
			defer d.lanes.Done()
			for n := uint64(1); ; n++ {
				select {
				case <-d.quit:
					return
				default:
				}
				tags := []ledger.Tag{{Region: r, Writer: uint32(w + 1), Seq: c.Epoch<<epochShift | n}}
				err := d.append(ns, tags)
				mu.Lock()
				switch {
				case err == nil:
					if acked++; acked == d.spec.Report {
						d.say("acked %s %d %d", ns, r, c.Epoch)
					}
				case errors.Is(err, kafka.ErrFenced):
					if fenced++; fenced == d.spec.Lanes {
						d.say("fenced %s %d %d", ns, r, c.Epoch)
					}
				}
				mu.Unlock()
				if errors.Is(err, kafka.ErrFenced) {
					return
				}
				if d.spec.Pace > 0 {
					t := time.NewTimer(d.spec.Pace)
					select {
					case <-d.quit:
					case <-t.C:
					}
					t.Stop()
				}
			}
		}()
	}
}

// append makes one journaled call.
func (d *datanode) append(ns string, tags []ledger.Tag) error {
	entries := make([]logstore.Entry, len(tags))
	for i, t := range tags {
		entries[i] = logstore.Entry{Namespace: ns, Region: t.Region, Data: ledger.Encode(t, d.spec.Size)}
	}
	ctx, cancel := context.WithTimeout(d.ctx, d.spec.CallTimeout)
	defer cancel()
	call := d.ledger.Begin(ns, tags)
	res, err := d.store.AppendBatch(ctx, entries)
	journaled := err
	if errors.Is(err, kafka.ErrFenced) {
		journaled = fmt.Errorf("%s%w", fencedMark, err)
	}
	d.ledger.End(call, res, journaled)
	return err
}

func oneLine(err error) string { return strings.ReplaceAll(err.Error(), "\n", "; ") }
