package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/kwal/kwal/logstore"
	"github.com/kwal/kwal/logstore/kafka"
)

func (a *app) regionsCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "regions",
		Short: "Show, claim, release or repair the ownership of regions (fencing)",
		Long: `A region moves between datanodes; the datanode that takes it over claims it
(LogStore.Claim): the claim gets an epoch above every earlier one, and from
then on every replay skips ("fences") the entries an older owner writes
above the claim, and the older owner's appends fail with ErrFenced. Claims
are recorded in the claims topic (--claims-topic), shared by every store of
the cluster. A region never claimed writes under epoch 0 and nothing of it
is fenced.`,
	}
	cmd.AddCommand(a.regionsShowCmd(), a.regionsClaimCmd(), a.regionsReleaseCmd(), a.regionsRepairCmd())
	return cmd
}

// regionFlags are the -n and -r flags of the regions commands.
type regionFlags struct {
	ns     string
	region uint64
}

func (a *app) addRegionFlags(cmd *cobra.Command, rf *regionFlags, regionHelp string) {
	f := cmd.Flags()
	f.StringVarP(&rf.ns, "namespace", "n", "", "namespace (topic) of the region(s) (required)")
	f.Uint64VarP(&rf.region, "region", "r", 0, regionHelp)
	a.bound(f, "region", anyValue.min, anyValue.max, "")
}

// check reports a missing -n, or a missing -r when the command needs one.
func (rf *regionFlags) check(cmd *cobra.Command, needRegion bool) error {
	if rf.ns == "" {
		return requiredFlag(cmd, "namespace")
	}
	if needRegion && !cmd.Flags().Changed("region") {
		return requiredFlag(cmd, "region")
	}
	return nil
}

// regionRow is one region as regions show prints it (and its --json).
type regionRow struct {
	Namespace    string     `json:"namespace"`
	Region       uint64     `json:"region"`
	Owner        string     `json:"owner"`
	Epoch        uint64     `json:"epoch"`
	ClaimOffset  int64      `json:"claim_offset"`
	SealedID     uint64     `json:"sealed_id"`
	Claims       int        `json:"claims"`
	Pending      uint64     `json:"pending_epoch,omitempty"`
	PendingOwner string     `json:"pending_owner,omitempty"`
	Released     bool       `json:"released"`
	ClaimedAt    *time.Time `json:"claimed_at,omitempty"`
	// FencedSeen is what a read of the region skipped as fenced; nil
	// with --no-read or when the region cannot be read.
	FencedSeen *int64 `json:"fenced_entries_seen"`
	// Unreadable are the offsets of the region's claims-topic records
	// that do not decode: the region fails closed until repaired.
	Unreadable []int64 `json:"unreadable_offsets,omitempty"`
}

func (a *app) regionsShowCmd() *cobra.Command {
	var (
		rf     regionFlags
		noRead bool
		asJSON bool
	)
	cmd := &cobra.Command{
		Use:   "show -n NS [-r R]",
		Short: "Show who owns the claimed regions of a namespace, and the fenced entries their logs hold",
		Long: `show catches up with the claims topic and prints, for each claimed region of
the namespace (or region -r only): its owner and epoch (the last committed
claim's), the offset of its claim record in the log, the sealed ID (the last
entry of the earlier owners that every replay returns), how many claims it
had, a claim under way (pending), whether its owner released it, when it was
claimed, and the fenced entries seen: entries an older owner wrote above a
newer claim, which no replay returns.

Counting fenced entries READS each shown region from the first entry the log
still holds, as a replay does (through the index in --index-dir, which show
does not change); --no-read skips the reads and leaves the column out ("-").

Regions never claimed are not listed; with -r, such a region is reported as
never claimed (epoch 0).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := rf.check(cmd, false); err != nil {
				return err
			}
			var only *uint64
			if cmd.Flags().Changed("region") {
				only = &rf.region
			}
			return a.runRegionsShow(cmd.Context(), rf.ns, only, noRead, asJSON)
		},
	}
	a.addRegionFlags(cmd, &rf, "only this region (default: every claimed region)")
	cmd.Flags().BoolVar(&noRead, "no-read", false, "do not read the regions (no count of fenced entries)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print one JSON object per region")
	return cmd
}

func (a *app) runRegionsShow(ctx context.Context, ns string, only *uint64, noRead, asJSON bool) error {
	s, err := a.startSession()
	if err != nil {
		return err
	}
	defer s.Close()
	// Read-only: the index may belong to a running datanode.
	st, err := s.openStore(ctx, func(c *kafka.Config) { c.IndexReadOnly = true })
	if err != nil {
		return err
	}
	defer func() { _ = st.Close() }()
	owns, err := st.Ownership(ctx, ns)
	if err != nil {
		return regionsError(ns, err)
	}
	var rows []regionRow
	for _, o := range owns {
		if only != nil && uint64(o.Region) != *only {
			continue
		}
		r := regionRow{Namespace: ns, Region: uint64(o.Region), Owner: o.Owner, Epoch: o.Epoch, ClaimOffset: o.ClaimOffset,
			SealedID: uint64(o.SealedID), Claims: o.Claims, Pending: o.Pending, PendingOwner: o.PendingOwner, Released: o.Released}
		if !o.ClaimedAt.IsZero() {
			t := o.ClaimedAt.UTC()
			r.ClaimedAt = &t
		}
		for _, u := range o.Unreadable {
			r.Unreadable = append(r.Unreadable, u.Offset)
		}
		rows = append(rows, r)
	}
	if len(rows) == 0 {
		if only != nil {
			fmt.Fprintf(a.stdout, "region %d of %s: never claimed (epoch 0): its entries are written under epoch 0 and none of them is fenced\n", *only, ns)
		} else {
			fmt.Fprintf(a.stdout, "no region of %s was ever claimed: every region writes under epoch 0 and nothing is fenced\n", ns)
		}
		return nil
	}
	if !noRead {
		from, err := firstID(ctx, s, ns)
		if err != nil {
			return err
		}
		// One read per region: ReadStats.Fenced counts a read's regions
		// together.
		for i := range rows {
			if len(rows[i].Unreadable) > 0 {
				continue // its reads fail until it is repaired
			}
			n, err := fencedSeen(ctx, st, ns, logstore.RegionID(rows[i].Region), from)
			if err != nil {
				return fmt.Errorf("reading region %d of %s to count its fenced entries: %w", rows[i].Region, ns, err)
			}
			rows[i].FencedSeen = &n
		}
	}
	if asJSON {
		enc := json.NewEncoder(a.stdout)
		for _, r := range rows {
			if err := enc.Encode(r); err != nil {
				return err
			}
		}
		return nil
	}
	tw := tabwriter.NewWriter(a.stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "REGION\tOWNER\tEPOCH\tCLAIM OFFSET\tSEALED ID\tCLAIMS\tPENDING\tRELEASED\tCLAIMED AT\tFENCED ENTRIES SEEN\tUNREADABLE EVENTS\n")
	for _, r := range rows {
		owner, offset, at, pending, fenced := r.Owner, strconv.FormatInt(r.ClaimOffset, 10), "-", "-", "-"
		if r.Epoch == 0 { // only a claim under way, none committed
			owner, offset = "-", "-"
		}
		if r.ClaimedAt != nil {
			at = r.ClaimedAt.Format(time.RFC3339)
		}
		if r.Pending > 0 {
			pending = fmt.Sprintf("epoch %d by %s", r.Pending, r.PendingOwner)
		}
		if r.FencedSeen != nil {
			fenced = strconv.FormatInt(*r.FencedSeen, 10)
		}
		unreadable := "-"
		if len(r.Unreadable) > 0 {
			unreadable = fmt.Sprintf("at offsets %v: fails closed (kwal regions repair)", r.Unreadable)
		}
		fmt.Fprintf(tw, "%d\t%s\t%d\t%s\t%d\t%d\t%s\t%s\t%s\t%s\t%s\n", r.Region, owner, r.Epoch, offset, r.SealedID, r.Claims, pending, yesNo(r.Released), at, fenced, unreadable)
	}
	return tw.Flush()
}

// fencedSeen reads region from from to the log's end and returns the
// entries the read skipped as fenced.
func fencedSeen(ctx context.Context, st *kafka.LogStore, ns string, region logstore.RegionID, from logstore.EntryID) (int64, error) {
	var stats kafka.ReadStats
	for _, err := range st.ReadWith(ctx, ns, map[logstore.RegionID]logstore.EntryID{region: from}, kafka.ReadOptions{Stats: &stats}) {
		if err != nil {
			return 0, err
		}
	}
	return stats.Fenced, nil
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

// regionsError says an unknown namespace as the other commands say it.
func regionsError(ns string, err error) error {
	if errors.Is(err, kafka.ErrUnknownNamespace) {
		return fmt.Errorf("namespace %q: %w", ns, kafka.ErrUnknownNamespace)
	}
	return err
}

// ownershipOf returns region's entry of namespace's ownership (false:
// never claimed).
func ownershipOf(ctx context.Context, st *kafka.LogStore, ns string, region uint64) (kafka.RegionOwnership, bool, error) {
	owns, err := st.Ownership(ctx, ns)
	if err != nil {
		return kafka.RegionOwnership{}, false, regionsError(ns, err)
	}
	for _, o := range owns {
		if uint64(o.Region) == region {
			return o, true, nil
		}
	}
	return kafka.RegionOwnership{}, false, nil
}

func (a *app) regionsClaimCmd() *cobra.Command {
	var (
		rf    regionFlags
		owner string
	)
	cmd := &cobra.Command{
		Use:   "claim -n NS -r R [--owner NAME]",
		Short: "Claim a region under a new epoch, fencing its earlier owners",
		Long: `claim does what LogStore.Claim does: it records a claim of the region under an
epoch above every earlier one (in the claims topic and in the namespace's
log), and prints the new epoch, the claim record's offset and the sealed ID:
the last entry of the earlier owners that every replay returns. From then
on the earlier owners' appends of the region fail with ErrFenced, and no
replay returns the entries they write above the claim.

The claim is made by this kwal process, which exits at once, under the name
--owner gives (default: the name the first store opened on --index-dir kept
there, host:pid of that process): nothing appends under the new epoch until a
datanode claims the region in turn (a higher epoch). Use it to fence a
stalled or unreachable owner before another node takes the region over.
Two claims racing: one wins, the other fails with ErrFenced naming it.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := rf.check(cmd, true); err != nil {
				return err
			}
			return a.withStoreConfig(cmd.Context(), func(c *kafka.Config) {
				if owner != "" {
					c.Owner = owner
				}
			}, func(ctx context.Context, st *kafka.LogStore) error {
				return a.runRegionsClaim(ctx, st, rf)
			})
		},
	}
	a.addRegionFlags(cmd, &rf, "region ID (required)")
	cmd.Flags().StringVar(&owner, "owner", "", "owner named in the claim (default: the name kept in --index-dir by the first store opened there, else host:pid of this process)")
	return cmd
}

func (a *app) runRegionsClaim(ctx context.Context, st *kafka.LogStore, rf regionFlags) error {
	before, claimed, err := ownershipOf(ctx, st, rf.ns, rf.region)
	if err != nil {
		return err
	}
	c, err := st.Claim(ctx, rf.ns, logstore.RegionID(rf.region))
	if err != nil {
		return err
	}
	after, _, err := ownershipOf(ctx, st, rf.ns, rf.region)
	if err != nil {
		return fmt.Errorf("the claim of region %d of %s succeeded (epoch %d, sealed ID %d), but reading it back failed: %w", rf.region, rf.ns, c.Epoch, c.SealedID, err)
	}
	w := a.stdout
	fmt.Fprintf(w, "claimed region %d of %s: epoch %d, owner %s\n", rf.region, rf.ns, c.Epoch, after.Owner)
	sealed := fmt.Sprintf("sealed ID %d: the earlier owners' history ends there", c.SealedID)
	if c.SealedID == 0 {
		sealed = "sealed ID 0: the region had no earlier entry"
	}
	fmt.Fprintf(w, "  claim record at offset %d; %s, and no replay returns what earlier owners write above the claim\n", after.ClaimOffset, sealed)
	if claimed && before.Epoch > 0 {
		fmt.Fprintf(w, "  previous owner %s (epoch %d)\n", before.Owner, before.Epoch)
	} else {
		fmt.Fprintf(w, "  previously never claimed (epoch 0)\n")
	}
	return nil
}

func (a *app) regionsReleaseCmd() *cobra.Command {
	var rf regionFlags
	cmd := &cobra.Command{
		Use:   "release -n NS -r R",
		Short: "Release a region: stops the appends of the process that calls it (so, from here, of none)",
		Long: `release does what LogStore.Release does, in this kwal process: it stops the
process's own appends of the region and returns the last entry ID it
acknowledged, and records a release in the claims topic when the process
holds a claim of the region. It is meaningful in the process that writes the
region (the datanode handing it over): a release cannot stop another
process's appends. This kwal process holds no claim (a claim lasts as long
as the process that made it, and 'kwal regions claim' exits at once), so
from here release records nothing and changes nothing for the datanodes:
it prints the region's ownership and exits with status 1. To stop an owner
that does not cooperate, claim the region instead (kwal regions claim):
its appends then fail with ErrFenced.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := rf.check(cmd, true); err != nil {
				return err
			}
			return a.withStore(cmd.Context(), func(ctx context.Context, st *kafka.LogStore) error {
				return a.runRegionsRelease(ctx, st, rf)
			})
		},
	}
	a.addRegionFlags(cmd, &rf, "region ID (required)")
	return cmd
}

func (a *app) runRegionsRelease(ctx context.Context, st *kafka.LogStore, rf regionFlags) error {
	// Ownership first: it fails for an unknown namespace, which Release
	// does not look up.
	o, claimed, err := ownershipOf(ctx, st, rf.ns, rf.region)
	if err != nil {
		return err
	}
	last, err := st.Release(ctx, rf.ns, logstore.RegionID(rf.region))
	if err != nil {
		return err
	}
	// The store was opened by this command: it holds no claim and
	// acknowledged nothing, so Release wrote no event (last is 0).
	state := "never claimed (epoch 0)"
	if claimed && o.Epoch > 0 {
		state = fmt.Sprintf("owned by %s under epoch %d", o.Owner, o.Epoch)
		if o.Released {
			state += ", released by it"
		}
	}
	fmt.Fprintf(a.stdout, "region %d of %s: %s\n", rf.region, rf.ns, state)
	return fmt.Errorf("release of region %d of %s changed nothing: this kwal process holds no claim of it and acknowledged no append of it (last acknowledged ID %d), and nothing was recorded in the claims topic; release it in the process that writes it (LogStore.Release), or claim it to fence its owner (kwal regions claim)",
		rf.region, rf.ns, last)
}

func (a *app) regionsRepairCmd() *cobra.Command {
	var (
		rf   regionFlags
		skip int64
	)
	cmd := &cobra.Command{
		Use:   "repair -n NS -r R --skip OFFSET",
		Short: "Skip an unreadable claims-topic record of a region, so that its appends, claims and reads work again",
		Long: `A record of the claims topic keyed as a region's event that does not decode
(a stray write with the same key, a corrupted event, an event of a newer
kwal) stops that region: its appends, claims and reads fail naming the
record's offset, since nothing can tell which of its writers are fenced.
'kwal regions show' lists such offsets.

repair writes a skip event naming the offset: from then on every store
folds the region as if the record were not there. It refuses an offset that
is not an unreadable record of the region. Decide first what the record was
(kwal dump of the claims topic shows it): if it is a newer kwal's claim,
upgrade every store instead of skipping it. Then claim the region again
from its rightful owner, which fences everything before it. The procedure
is in docs/failures.md.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := rf.check(cmd, true); err != nil {
				return err
			}
			if !cmd.Flags().Changed("skip") {
				return requiredFlag(cmd, "skip")
			}
			return a.withStore(cmd.Context(), func(ctx context.Context, st *kafka.LogStore) error {
				if err := st.SkipClaimsRecord(ctx, rf.ns, logstore.RegionID(rf.region), skip); err != nil {
					return err
				}
				o, _, err := ownershipOf(ctx, st, rf.ns, rf.region)
				if err != nil {
					return err
				}
				left := "the region's fencing is decided again"
				if len(o.Unreadable) > 0 {
					left = fmt.Sprintf("%d unreadable record(s) of the region left", len(o.Unreadable))
				}
				fmt.Fprintf(a.stdout, "skipped the claims topic's record at offset %d of region %d of %s: %s\n", skip, rf.region, rf.ns, left)
				return nil
			})
		},
	}
	a.addRegionFlags(cmd, &rf, "region ID (required)")
	cmd.Flags().Int64Var(&skip, "skip", 0, "offset of the unreadable record in the claims topic (required)")
	a.bound(cmd.Flags(), "skip", 0, math.MaxInt64, "Kafka offsets are signed 64-bit numbers")
	return cmd
}
