package kafka

import (
	"context"
	"encoding/hex"
	"errors"
	"math"
	"strings"

	"github.com/kwal/kwal/logstore/kafka/claim"
	"github.com/kwal/kwal/logstore/kafka/index"
)

// claimsSnapshotPrefix begins the name of the blob that holds the store's
// fold of the claims topic (claim.State.MarshalTrimmed); the claims
// topic's ID follows, so a snapshot never applies to a topic deleted and
// created again under the same name (its offsets start over).
const claimsSnapshotPrefix = "claims-snapshot-"

// claimsSnapshotEvery is how many claims-topic records a store folds
// between two snapshots: a store opening reads at most about that many
// more than those written while it was closed.
const claimsSnapshotEvery = 4096

// claimsSnapshots saves the store's fold of the claims topic in the index's
// blob store, so that a store opening on it resumes the fold instead of
// reading the claims topic whole. One goroutine saves, when the follower
// folded claimsSnapshotEvery records since the last save, and once more
// at Close.
type claimsSnapshots struct {
	s        *LogStore
	st       index.Store
	readOnly bool // IndexReadOnly: load, never save
	// ctx ends when the store closes: it stops the goroutine and a save
	// in flight.
	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{}
}

// openClaimsSnapshots resumes the follower from the latest snapshot in st
// (any failure to: from the start of the claims topic, which is slower,
// never wrong) and starts the goroutine that saves them.
func (s *LogStore) openClaimsSnapshots(ctx context.Context, st index.Store, readOnly bool) *claimsSnapshots {
	c := &claimsSnapshots{s: s, st: st, readOnly: readOnly, done: make(chan struct{})}
	c.ctx, c.cancel = context.WithCancel(context.Background())
	if err := c.load(ctx); err != nil {
		s.log.Warn("kwal: open: the claims snapshot could not be used: reading the claims topic from its start", "err", err)
	}
	go c.run()
	return c
}

func (c *claimsSnapshots) run() {
	defer close(c.done)
	f := c.s.owning.follower
	for {
		select {
		case <-c.ctx.Done():
			return
		case <-f.kick:
		}
		if c.readOnly {
			continue
		}
		ctx, cancel := context.WithTimeout(c.ctx, 4*c.s.cfg.RequestTimeout)
		if err := c.save(ctx); err != nil && c.ctx.Err() == nil {
			c.s.log.Warn("kwal: saving the claims snapshot failed (a store opening reads more of the claims topic; nothing else depends on it)", "err", err)
		}
		cancel()
	}
}

// stopSaving stops the goroutine (an Open that fails, and Close).
func (c *claimsSnapshots) stopSaving() {
	c.cancel()
	<-c.done
}

// close stops the goroutine and saves a last snapshot.
func (c *claimsSnapshots) close() {
	c.stopSaving()
	if c.readOnly {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*c.s.cfg.RequestTimeout)
	defer cancel()
	if err := c.save(ctx); err != nil {
		c.s.log.Warn("kwal: close: saving the claims snapshot failed (the next open reads more of the claims topic)", "err", err)
	}
}

// claimsTopicID is the claims topic's ID ("" when it does not exist).
func (c *claimsSnapshots) claimsTopicID(ctx context.Context) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, c.s.cfg.RequestTimeout)
	defer cancel()
	td, err := c.s.adm.ListTopics(ctx, c.s.cfg.ClaimsTopic)
	if err != nil {
		return "", err
	}
	d, ok := td[c.s.cfg.ClaimsTopic]
	if !ok || d.Err != nil {
		return "", nil
	}
	// Hex: blob names are plain (the ID's String is base64, with '/').
	return hex.EncodeToString(d.ID[:]), nil
}

func (c *claimsSnapshots) load(ctx context.Context) error {
	id, err := c.claimsTopicID(ctx)
	if err != nil || id == "" {
		return err
	}
	b, err := c.st.Get(ctx, claimsSnapshotPrefix+id)
	if errors.Is(err, index.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	state := claim.NewState()
	if err := state.UnmarshalBinary(b); err != nil {
		return err
	}
	c.s.owning.follower.install(state)
	c.s.log.Debug("kwal: open: resumed the claims topic's fold from a snapshot", "next_offset", state.Next, "regions", state.Len())
	return nil
}

// save writes a snapshot of the fold, without the claims below each
// namespace's log start that can no longer fence anything (log starts only
// rise, so one read now holds for every later read of the snapshot).
func (c *claimsSnapshots) save(ctx context.Context) error {
	f := c.s.owning.follower
	f.mu.Lock()
	nss := f.state.Namespaces()
	f.mu.Unlock()
	starts := make(map[claim.Topic]int64)
	if len(nss) > 0 {
		lctx, cancel := context.WithTimeout(ctx, c.s.cfg.RequestTimeout)
		td, err := c.s.adm.ListTopics(lctx, nss...)
		if err != nil {
			cancel()
			return err
		}
		so, err := c.s.adm.ListStartOffsets(lctx, nss...)
		cancel()
		if err != nil {
			return err
		}
		f.mu.Lock()
		for _, ns := range nss {
			for _, id := range f.state.Regions(ns) {
				t := claim.Topic{Namespace: ns, TopicID: id.TopicID}
				if _, done := starts[t]; done {
					continue
				}
				d, ok := td[ns]
				switch {
				case !ok || d.Err != nil || d.ID.String() != id.TopicID:
					// The topic was deleted: nothing of it is read again.
					starts[t] = math.MaxInt64
				default:
					if o, ok := so.Lookup(ns, partition); ok && o.Err == nil {
						starts[t] = o.Offset
					}
				}
			}
		}
		f.mu.Unlock()
	}
	f.mu.Lock()
	b, err := f.state.MarshalTrimmed(starts)
	next := f.state.Next
	f.mu.Unlock()
	if err != nil {
		return err
	}
	id, err := c.claimsTopicID(ctx)
	if err != nil || id == "" {
		return err
	}
	if err := c.st.Put(ctx, claimsSnapshotPrefix+id, b); err != nil {
		return err
	}
	f.savedNext.Store(next)
	// Snapshots of claims topics deleted since are of no use.
	names, err := c.st.List(ctx, claimsSnapshotPrefix)
	if err != nil {
		return err
	}
	for _, n := range names {
		if n != claimsSnapshotPrefix+id && strings.HasPrefix(n, claimsSnapshotPrefix) {
			if err := c.st.Delete(ctx, n); err != nil {
				return err
			}
		}
	}
	return nil
}
