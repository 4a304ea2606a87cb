package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/kwal/kwal/internal/chaos"
	"github.com/kwal/kwal/logstore/kafka"
)

type chaosOpts struct {
	scenarios []string
	cycles    int
	writers   int
	regions   int
	size      int
	pace      time.Duration
	script    string
	keep      bool
	handovers int
	every     time.Duration
}

func (a *app) chaosCmd() *cobra.Command {
	var o chaosOpts
	cmd := &cobra.Command{
		Use:   "chaos",
		Short: "Kill, stop and pause the nodes of a 3-node test cluster while writers append, then check every entry",
		Long: `chaos runs broker-fault scenarios against a 3-node Kafka cluster started by
'scripts/kafka.sh start --brokers 3' (RF 3, min.insync.replicas=2, unclean
leader election off), driving its nodes through the same script (so
KWAL_KAFKA_HOME and KWAL_KAFKA_PORT must name that cluster). Writers append
self-describing entries all the time; after each scenario every region is
replayed through the index and by a full scan and checked against the
ledger of what was acknowledged: lost, duplicated or reordered entries make
the command exit with status 2.

Scenarios: leader-kill (the partition leader SIGKILLed and restarted,
--cycles times), leader-pause (SIGSTOP for twice --produce-timeout),
below-min-isr (both followers SIGKILLed for twice --produce-timeout),
rolling-restart (each node SIGTERMed and restarted in turn),
region-failover (no broker fault: three datanode processes, this command
re-executed with the same flags, share 12 regions of 4 namespaces, each
running --writers writers per owned region; every --handover-every one
region moves, --handovers times: its owner is SIGSTOPped with calls in
flight, another datanode claims it and appends, the owner is resumed and
its calls must fail with ErrFenced; no replay may return what it wrote
above the claim). Each runs on namespaces of its own, deleted afterwards
unless --keep.`,
		Example: `  scripts/kafka.sh start --brokers 3
  kwal chaos --brokers 127.0.0.1:9092,127.0.0.1:9094,127.0.0.1:9096 --cycles 20
  scripts/kafka.sh stop`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return a.runChaos(cmd.Context(), o) },
	}
	f := cmd.Flags()
	f.StringSliceVar(&o.scenarios, "scenario", chaos.Scenarios, "scenarios to run, comma-separated")
	f.IntVar(&o.cycles, "cycles", 3, "leader kills in the leader-kill scenario")
	f.IntVar(&o.writers, "writers", 8, "goroutines appending, each waiting for its call (region-failover: per region a datanode owns)")
	f.IntVar(&o.regions, "regions", 8, "regions the writers share (region-failover has 12 of its own)")
	f.IntVar(&o.size, "entry-size", 1024, "bytes of each entry's data")
	// --size was this flag's first name; in demo it is the total. Its
	// value is --entry-size's, checked under that name.
	f.IntVar(&o.size, "size", 1024, "bytes of each entry's data")
	_ = f.MarkDeprecated("size", "use --entry-size (in kwal demo, --size is the total to append)")
	a.bound(f, "size", anyValue.min, anyValue.max, "")
	f.DurationVar(&o.pace, "pace", 20*time.Millisecond, "pause between one writer's calls")
	f.IntVar(&o.handovers, "handovers", 12, "region moves in the region-failover scenario")
	f.DurationVar(&o.every, "handover-every", 2*time.Second, "time between region-failover's moves")
	f.StringVar(&o.script, "script", "scripts/kafka.sh", "the script that started the cluster (drives its nodes)")
	f.BoolVar(&o.keep, "keep", false, "keep the scenarios' namespaces")
	a.boundDuration(f, "pace", 0, time.Minute, "a writer pausing longer than that tests nothing")
	a.bound(f, "cycles", 1, 10000, "")
	a.bound(f, "handovers", 1, 10000, "")
	a.boundDuration(f, "handover-every", 100*time.Millisecond, time.Hour, "")
	a.bound(f, "writers", 1, 1024, "")
	a.bound(f, "regions", 1, maxRegions, "the ledger keeps what every region acknowledged, to check the replays")
	a.bound(f, "entry-size", 64, uint64(min(1<<20, kafka.DefaultConfig().MaxEntryBytes)), "the writers' entries stay small so that a scenario's faults meet many calls; kwal refuses entries above MaxEntryBytes")
	return cmd
}

func (a *app) runChaos(ctx context.Context, o chaosOpts) error {
	if spec := a.getenv(chaos.DatanodeEnv); spec != "" {
		// A datanode of region-failover, started by the scenario below.
		cfg, err := a.config()
		if err != nil {
			return err
		}
		if a.stdin == nil {
			return errors.New("chaos datanode: no standard input to read commands from")
		}
		return chaos.RunDatanode(ctx, cfg, spec, a.stdin, a.stdout)
	}
	if len(a.g.brokers) == 0 {
		return errors.New("chaos needs --brokers: the brokers of a 3-node cluster started by 'scripts/kafka.sh start --brokers 3' (it kills and restarts the nodes through the script)")
	}
	for _, sc := range o.scenarios {
		if !slices.Contains(chaos.Scenarios, sc) {
			return fmt.Errorf("--scenario: %q is not one of %s", sc, strings.Join(chaos.Scenarios, ", "))
		}
	}
	if _, err := os.Stat(o.script); err != nil {
		return fmt.Errorf("--script: %w", err)
	}
	cfg, err := a.config()
	if err != nil {
		return err
	}
	idx, err := os.MkdirTemp("", "kwal-chaos-index-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(idx)
	cfg.IndexDir = idx
	opts, err := kafka.ClientOptions(cfg)
	if err != nil {
		return err
	}
	cl, err := chaos.NewCluster(cfg.Brokers, o.script, opts...)
	if err != nil {
		return err
	}
	defer cl.Close()
	if nodes, err := cl.Nodes(ctx); err != nil {
		return err
	} else if len(nodes) != 3 {
		return fmt.Errorf("chaos needs a 3-node cluster; the brokers list %d node(s): %v", len(nodes), nodes)
	}

	interactive := a.interactive()
	progress := func(p chaos.Progress) {
		line := fmt.Sprintf("%s: fault %d/%d, %s: %d calls acknowledged, %d failed, longest %s",
			p.Scenario, p.Cycles, p.Of, p.Elapsed.Round(time.Second), p.Stats.AckedCalls, p.Stats.FailedCalls, p.Stats.LongestCall.Round(time.Millisecond))
		if interactive {
			fmt.Fprintf(a.stderr, "\r\033[K%s", line)
		} else if int(p.Elapsed.Seconds())%10 == 0 {
			fmt.Fprintln(a.stderr, line)
		}
	}
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("chaos: the datanodes re-execute this program: %w", err)
	}
	var results []chaos.Result
	var runErr error
	stamp := time.Now().UTC().Format("20060102-150405")
	for _, sc := range o.scenarios {
		topic := "kwal-chaos-" + stamp + "-" + sc
		opts := chaos.Options{
			Cluster:  cl,
			Store:    cfg,
			Topic:    topic,
			Load:     chaos.Load{Writers: o.writers, Regions: o.regions, Size: o.size, Pace: o.pace, CallTimeout: 4 * cfg.ProduceTimeout},
			Cycles:   o.cycles,
			Progress: progress,
			// The same command line: the datanodes' stores are configured
			// by the same flags.
			Datanode:      append([]string{exe}, os.Args[1:]...),
			HandoverEvery: o.every,
		}
		if sc == chaos.RegionFailover {
			opts.Cycles = o.handovers
			opts.Logf = func(format string, args ...any) { a.log.Info(fmt.Sprintf(format, args...)) }
		}
		res, err := chaos.Run(ctx, sc, opts)
		if interactive {
			fmt.Fprint(a.stderr, "\r\033[K")
		}
		if !o.keep {
			topics := []string{topic}
			if res.Failover != nil {
				topics = res.Failover.Topics
			}
			for _, t := range topics {
				a.deleteChaosTopic(cfg, t)
			}
		}
		if err != nil {
			runErr = fmt.Errorf("%s: %w", sc, err)
			break
		}
		results = append(results, res)
		fmt.Fprintf(a.stderr, "%s: done in %s\n", sc, res.Took.Round(time.Second))
	}
	a.printChaos(cfg.ProduceTimeout, results)
	if runErr != nil {
		return runErr
	}
	var bad []error
	for _, r := range results {
		if err := r.Err(); err != nil {
			bad = append(bad, err)
		}
	}
	if len(bad) > 0 {
		return &exitErr{code: exitMismatch, err: linesError{fmt.Errorf("chaos: the replays do not match what was acknowledged:\n%w", errors.Join(bad...))}}
	}
	return nil
}

// deleteChaosTopic deletes a scenario's namespace, warning on failure.
func (a *app) deleteChaosTopic(cfg kafka.Config, topic string) {
	ctx, cancel := context.WithTimeout(context.Background(), cfg.RequestTimeout+cfg.DialTimeout)
	defer cancel()
	cfg.IndexDir = ""
	s, err := kafka.Open(ctx, cfg)
	if err == nil {
		err = s.DeleteNamespace(ctx, topic)
		_ = s.Close()
	}
	if err != nil {
		a.log.Warn("could not delete the scenario's namespace", "namespace", topic, "err", err)
	}
}

// printChaos prints the "Failures survived" table.
func (a *app) printChaos(produceTimeout time.Duration, results []chaos.Result) {
	if len(results) == 0 {
		return
	}
	tw := tabwriter.NewWriter(a.stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "scenario\tcycles\tacknowledged\tfailed (in log)\tlost\tduplicated\treordered\tlongest stall\tfirst success after\t")
	for _, r := range results {
		first := r.FirstSuccess.Round(time.Millisecond).String()
		if r.Failover != nil {
			first = "-" // no broker fault
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d (%d)\t%d\t%d\t%d\t%s\t%s\t\n", r.Scenario, r.Cycles, r.Stats.Acked,
			r.Stats.Failed+r.Stats.Pending, r.Scan.FailedPresent, r.Lost(), r.Duplicated(), r.Reordered(),
			r.Stats.LongestCall.Round(time.Millisecond), first)
	}
	_ = tw.Flush()
	for _, r := range results {
		if f := r.Failover; f != nil {
			lat := slices.Clone(f.Claims)
			slices.Sort(lat)
			var p50, worst time.Duration
			if len(lat) > 0 {
				p50, worst = lat[len(lat)/2], lat[len(lat)-1]
			}
			fmt.Fprintf(a.stdout, "region-failover: %d hand-overs; zombie appends refused %d of %d in flight at the resume (%d acknowledged below the claim); fenced entries skipped on replay %d; stale entries replayed %d; wrong sealed IDs %d; claim latency p50 %s, max %s (%d claims)\n",
				r.Cycles, f.ZombieRefused, f.ZombieCalls, f.ZombieAcked, f.FencedSkipped, f.Stale, f.SealedWrong, p50.Round(time.Millisecond), worst.Round(time.Millisecond), len(f.Claims))
		}
	}
	fmt.Fprintf(a.stdout, "(ProduceTimeout %s; first success: the worst time from a kill, resume or restart to the first acknowledged call begun after it)\n", produceTimeout)
}
