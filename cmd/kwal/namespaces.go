package main

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/kwal/kwal/logstore/kafka"
)

func (a *app) namespacesCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:     "namespaces",
		Aliases: []string{"ns"},
		Short:   "List, create, prune or delete namespaces (topics)",
		Long: `A namespace is where regions' logs live: for kwal on Kafka, a topic with one
partition. Many regions share one namespace.`,
	}
	cmd.AddCommand(
		&cobra.Command{
			Use:   "list",
			Short: "List the namespaces (non-internal topics) and what their topics let the broker delete",
			Long: `list prints one namespace a line after a header: its name, and its topic's
retention. kwal's own topics delete nothing by age or size (only Prune
deletes, what no region needs any more); a topic whose retention.ms or
retention.bytes is set, or that is compacted, is flagged: the broker deletes
its entries whatever the regions still need.`,
			Args: cobra.NoArgs,
			RunE: func(cmd *cobra.Command, _ []string) error {
				return a.withStore(cmd.Context(), func(ctx context.Context, st *kafka.LogStore) error {
					names, err := st.ListNamespaces(ctx)
					if err != nil {
						return err
					}
					tw := tabwriter.NewWriter(a.stdout, 0, 0, 2, ' ', 0)
					fmt.Fprintf(tw, "NAMESPACE\tRETENTION\n")
					for _, n := range names {
						fmt.Fprintf(tw, "%s\t%s\n", n, retentionText(ctx, st, n))
					}
					return tw.Flush()
				})
			},
		},
		a.namespacesCreateCmd(),
		a.namespacesPruneCmd(),
		a.namespacesDeleteCmd(),
	)
	return cmd
}

// namespacesCreateCmd is "namespaces create": named namespaces, or a topic
// pool (--pool N --prefix P: P_0 … P_{N-1}, see kafka.TopicPool).
func (a *app) namespacesCreateCmd() *cobra.Command {
	var pool int
	var prefix string
	cmd := &cobra.Command{
		Use:   "create [NAME...]",
		Short: "Create namespaces (one partition each), or a pool of them; existing ones are left as they are, and said so",
		Long: `create makes each NAME, or with --pool N the topic pool PREFIX_0 … PREFIX_{N-1}
(GreptimeDB's num_topics and topic_name_prefix), with the store's replication
factor and topic configs.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if pool > 0 {
				p, err := kafka.NewTopicPool(prefix, pool)
				if err != nil {
					return err
				}
				args = append(args, p.Names()...)
			}
			if len(args) == 0 {
				return fmt.Errorf("%s: name the namespaces to create, or give --pool", commandName(cmd))
			}
			return a.withStore(cmd.Context(), func(ctx context.Context, st *kafka.LogStore) error {
				names, err := st.ListNamespaces(ctx)
				if err != nil {
					return err
				}
				for _, n := range args {
					if slices.Contains(names, n) {
						fmt.Fprintf(a.stdout, "exists %s (left as it is)\n", n)
						continue
					}
					if err := st.CreateNamespace(ctx, n); err != nil {
						return err
					}
					fmt.Fprintf(a.stdout, "created %s\n", n)
				}
				return nil
			})
		},
	}
	cmd.Flags().IntVar(&pool, "pool", 0, "create a topic pool of this many namespaces, named --prefix_0 … --prefix_{N-1}")
	cmd.Flags().StringVar(&prefix, "prefix", "greptimedb_wal_topic", "name prefix of the --pool namespaces")
	a.bound(cmd.Flags(), "pool", 0, 10_000, "every namespace is a topic the cluster keeps metadata and files for")
	return cmd
}

// withStore runs fn with an open store and closes it (and the session).
func (a *app) withStore(ctx context.Context, fn func(context.Context, *kafka.LogStore) error) error {
	return a.withStoreConfig(ctx, nil, fn)
}

// withStoreConfig is withStore with a change to the store's config.
func (a *app) withStoreConfig(ctx context.Context, mutate func(*kafka.Config), fn func(context.Context, *kafka.LogStore) error) error {
	s, err := a.startSession()
	if err != nil {
		return err
	}
	defer s.Close()
	st, err := s.openStore(ctx, mutate)
	if err != nil {
		return err
	}
	if err := fn(ctx, st); err != nil {
		_ = st.Close()
		return err
	}
	return st.Close()
}

func (a *app) namespacesPruneCmd() *cobra.Command {
	var (
		dryRun bool
		named  []string
	)
	cmd := &cobra.Command{
		Use:   "prune NAME... | -n NAME...",
		Short: "Delete the records no region needs any more, and show what holds the rest back",
		Long: `prune loads the index in --index-dir (read-only: it may belong to a running
datanode), scans what the index does not account for, and deletes each
namespace's records below the lowest entry any region still holds: every
region with records there must have declared them obsolete (Obsolete marks in
the log, from any datanode). It prints what was deleted, or why nothing could
be, and the regions holding the prune point back with the bytes each pins
(estimated from the partition's size). With --dry-run it deletes nothing.
Namespaces are named as arguments or with -n, as in the other commands.

With --prune-mode mark-only (for clusters that refuse DeleteRecords) it writes
the prune mark only and leaves deleting to the topic's retention. On a topic
with a finite retention it prints the headroom: how long the oldest entry a
region still needs has before the retention deletes it, flagged AT RISK under
--retention-warn-margin.`,
		Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			names := append(slices.Clone(named), args...)
			if len(names) == 0 {
				return fmt.Errorf("%s: name at least one namespace (NAME or -n NAME)", commandName(cmd))
			}
			return a.withStoreConfig(cmd.Context(), func(c *kafka.Config) {
				c.IndexReadOnly = true
			}, func(ctx context.Context, st *kafka.LogStore) error {
				for _, n := range names {
					res, err := st.PruneWith(ctx, n, kafka.PruneOptions{DryRun: dryRun})
					if err != nil {
						return err
					}
					a.printPrune(res, dryRun)
					a.printRetention(res)
				}
				return nil
			})
		},
	}
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "only report the prune point and what holds it back")
	cmd.Flags().StringSliceVarP(&named, "namespace", "n", nil, "namespace to prune (repeatable; or name them as arguments)")
	return cmd
}

// maxHoldersShown bounds the regions prune lists.
const maxHoldersShown = 10

func (a *app) printPrune(res kafka.PruneResult, dryRun bool) {
	w := a.stdout
	switch {
	case res.Deleted:
		fmt.Fprintf(w, "%s: deleted IDs %d..%d (about %s); the first entry ID available is %d\n",
			res.Namespace, res.Before, res.FirstID-1, humanBytes(res.PrunableBytes), res.FirstID)
	case res.Marked:
		fmt.Fprintf(w, "%s: marked IDs %d..%d obsolete (about %s) for the topic's retention to delete (prune mode %s); the first entry ID available is %d\n",
			res.Namespace, res.FirstID, res.PrunePoint-1, humanBytes(res.PrunableBytes), kafka.PruneMarkOnly, res.FirstID)
	case dryRun && res.PrunePoint > res.FirstID:
		verb := "delete"
		if a.g.pruneMode == kafka.PruneMarkOnly {
			verb = "mark obsolete"
		}
		fmt.Fprintf(w, "%s: would %s IDs %d..%d (about %s); the first entry ID available is %d\n",
			res.Namespace, verb, res.FirstID, res.PrunePoint-1, humanBytes(res.PrunableBytes), res.FirstID)
	default:
		fmt.Fprintf(w, "%s: nothing to delete: %s; the first entry ID available is %d\n", res.Namespace, res.Reason, res.FirstID)
	}
	// LogBytes is 0 when it is not known (a log that holds entries is
	// never 0 B): then it is left out rather than printed as 0 B.
	size := ""
	if res.LogBytes > 0 || res.LatestID < res.FirstID {
		size = ", log " + humanBytes(res.LogBytes)
	}
	fmt.Fprintf(w, "%s: prune point ID %d, latest ID %d%s\n", res.Namespace, res.PrunePoint, res.LatestID, size)
	if len(res.Holders) == 0 {
		return
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "\tREGION\tFIRST NEEDED ID\tOBSOLETE UP TO\tPINS\t\n")
	for i, h := range res.Holders {
		if i == maxHoldersShown {
			fmt.Fprintf(tw, "\t…\t%d more\t\t\t\n", len(res.Holders)-i)
			break
		}
		fmt.Fprintf(tw, "\t%d\t%d\t%d\t%s\t\n", h.Region, h.FirstNeeded, h.ObsoleteUpTo, humanBytes(h.PinnedBytes))
	}
	_ = tw.Flush()
}

// printRetention prints what the topic's retention may delete of what the
// regions still need: the headroom of the oldest entry needed.
func (a *app) printRetention(res kafka.PruneResult) {
	w := a.stdout
	r := res.Retention
	switch {
	case res.RetentionErr != nil:
		fmt.Fprintf(w, "%s: retention unknown: %s\n", res.Namespace, strings.TrimPrefix(errorText(res.RetentionErr), "kwal: "))
	case !r.Finite():
		fmt.Fprintf(w, "%s: retention %s: no headroom to watch\n", res.Namespace, r)
	case res.RetentionLimit == "":
		fmt.Fprintf(w, "%s: %s: no entry is needed, nothing at risk\n", res.Namespace, r)
	default:
		line := fmt.Sprintf("%s: %s: headroom %s (%s) for the oldest entry needed, ID %d, written %s ago",
			res.Namespace, r, res.RetentionHeadroom.Round(time.Second), res.RetentionLimit, res.PrunePoint, time.Since(res.OldestNeededAt).Round(time.Second))
		if res.RetentionAtRisk {
			region := ""
			if len(res.Holders) > 0 {
				region = fmt.Sprintf(" region %d", res.Holders[0].Region)
			}
			line += fmt.Sprintf("; AT RISK, under the margin of %s: flush%s (Obsolete) or raise %s", a.g.retentionWarnMargin, region, res.RetentionLimit)
		}
		fmt.Fprintln(w, line)
	}
}

// retentionText says what the namespace's topic lets the broker delete on
// its own, flagging a topic that deletes entries by age, size or
// compaction.
func retentionText(ctx context.Context, st *kafka.LogStore, ns string) string {
	r, err := st.TopicRetention(ctx, ns)
	if err != nil {
		return "unknown: " + errorText(err)[len("kwal: "):]
	}
	if r.Finite() || r.Compacted() {
		return r.String() + ": DELETES entries whatever the regions still need"
	}
	return r.String()
}
