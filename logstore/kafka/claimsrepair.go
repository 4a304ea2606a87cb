package kafka

import (
	"context"
	"errors"
	"slices"

	"github.com/kwal/kwal/internal/kwalerr"
	"github.com/kwal/kwal/logstore"
	"github.com/kwal/kwal/logstore/kafka/claim"
)

// ErrNotUnreadable is matched by SkipClaimsRecord's error when the offset
// is not an unreadable record of the region: skipping a readable event
// could drop a claim.
var ErrNotUnreadable = errors.New("kwal: not an unreadable record of the region")

// SkipClaimsRecord repairs a region whose fencing an unreadable record of
// the claims topic stopped (RegionOwnership.Unreadable): it writes a skip
// event naming the record's offset, after which every store folds the
// region as if the record were not there. It refuses an offset that is
// not one of the region's unreadable records.
//
// Skipping is the operator's decision that the record was not a claim
// that must fence (a stray write, a corrupted event). If it was a newer
// kwal's claim, skipping forgets it: upgrade every store first instead.
// After a skip, the region's next Claim fences everything before it; the
// procedure is in docs/failures.md.
func (s *LogStore) SkipClaimsRecord(ctx context.Context, namespace string, region logstore.RegionID, offset int64) (err error) {
	defer func() { s.metrics.noteRefused(err) }()
	if err := s.begin("skip claims record"); err != nil {
		return err
	}
	defer s.end()
	fail := func(err error) error {
		return kwalerr.Errorf("skip the claims topic's record at offset %d of %q region %d: %w", offset, namespace, region, err)
	}
	// A region's key needs only a valid name: its topic may be gone.
	if err := validateTopic(namespace); err != nil {
		return fail(err)
	}
	f := s.owning.follower
	if err := f.await(ctx); err != nil {
		return fail(err)
	}
	if !slices.ContainsFunc(f.unreadable(namespace, uint64(region)), func(u claim.Unreadable) bool { return u.Offset == offset }) {
		return fail(ErrNotUnreadable)
	}
	if err := s.writeEvent(ctx, claim.Event{Op: claim.OpSkip, Namespace: namespace, Region: uint64(region), Skip: offset, Owner: s.owning.owner}); err != nil {
		return fail(err)
	}
	if err := f.await(ctx); err != nil {
		return fail(err)
	}
	s.log.Warn("kwal: skipped an unreadable record of the claims topic", "topic", namespace, "region", region, "offset", offset, "owner", s.owning.owner)
	return nil
}
