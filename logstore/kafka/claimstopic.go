package kafka

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/kwal/kwal/internal/kwalerr"
)

// claimsTopicConfigs are the configs the claims topic must have, each with
// what the broker would do otherwise. Fencing folds every event of the
// topic in log order (package claim): an event the broker drops can be a
// claim's pending or commit, and then stores disagree on who owns a region
// or replay entries a claim fenced.
var claimsTopicConfigs = []struct{ key, want, otherwise string }{
	{"cleanup.policy", "delete", "compaction keeps only a region's last event, which may be a lost race's, and drops the claims before it"},
	{"retention.ms", "-1", "the broker deletes claim events by age, and every store forgets those claims"},
	{"retention.bytes", "-1", "the broker deletes claim events by size, and every store forgets those claims"},
}

// errClaimsTopicDrops is matched by the error of a Claim whose claims topic
// lets the broker drop events (checkClaimsTopicConfig).
var errClaimsTopicDrops = errors.New("kwal: the claims topic's configs let the broker drop claim events")

// checkClaimsTopicConfig describes topic's configs and fails, with an error
// matching errClaimsTopicDrops that names the topic and each config key,
// its value and what it must be, unless the topic neither compacts nor
// deletes by age or size. A failure to describe the configs is returned
// as it is (it does not match errClaimsTopicDrops).
func checkClaimsTopicConfig(ctx context.Context, adm *kadm.Client, topic string) error {
	rcs, err := adm.DescribeTopicConfigs(ctx, topic)
	if err != nil {
		return kwalerr.Errorf("claims topic %q: describe configs: %w", topic, mapUnknown(err))
	}
	rc, err := rcs.On(topic, nil)
	if err == nil {
		err = rc.Err
	}
	if err != nil {
		return kwalerr.Errorf("claims topic %q: describe configs: %w", topic, mapUnknown(err))
	}
	values := make(map[string]*string, len(claimsTopicConfigs))
	for _, c := range rc.Configs {
		values[c.Key] = c.Value
	}
	var bad []string
	for _, c := range claimsTopicConfigs {
		v, ok := values[c.key]
		switch {
		case !ok || v == nil:
			bad = append(bad, fmt.Sprintf("%s is not reported by the broker; it must be %q (otherwise %s)", c.key, c.want, c.otherwise))
		case *v != c.want:
			bad = append(bad, fmt.Sprintf("%s is %q; it must be %q (otherwise %s)", c.key, *v, c.want, c.otherwise))
		}
	}
	if len(bad) > 0 {
		return kwalerr.Errorf("claims topic %q: %s: %w", topic, strings.Join(bad, "; "), errClaimsTopicDrops)
	}
	return nil
}

// ensureClaimsTopic creates the claims topic unless it exists (when
// AutoCreateTopics is set): one partition, nothing deleted.
func (s *LogStore) ensureClaimsTopic(ctx context.Context) error {
	_, err := s.existOrCreateClaimsTopic(ctx)
	return err
}

// readyClaimsTopic is ensureClaimsTopic for a Claim, which is about to
// write events there: the first time this store finds the topic made by
// someone else, it checks that the topic keeps every event
// (checkClaimsTopicConfig), and fails the claim otherwise; a later Claim
// checks again until a check passes. A broker that refuses to describe
// the configs (ACLs) leaves the topic unchecked: logged, not fatal, as a
// namespace's topic is (checkTopic).
func (s *LogStore) readyClaimsTopic(ctx context.Context) error {
	existed, err := s.existOrCreateClaimsTopic(ctx)
	if err != nil || s.owning.claimsTopicChecked.Load() {
		return err
	}
	if !existed {
		s.owning.claimsTopicChecked.Store(true) // created with claimsTopicConfigs
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, s.cfg.RequestTimeout)
	defer cancel()
	err = checkClaimsTopicConfig(ctx, s.adm, s.cfg.ClaimsTopic)
	if err != nil {
		s.metrics.claimsCheckFailures.WithLabelValues(claimsCheckCause(err)).Inc()
	}
	switch {
	case err == nil:
		s.owning.claimsTopicChecked.Store(true)
	case errors.Is(err, errClaimsTopicDrops):
		return err
	default:
		s.log.Warn("kwal: could not check the claims topic's retention and cleanup policy; claim events may be deleted by the broker", "topic", s.cfg.ClaimsTopic, "err", err)
	}
	return nil
}

// existOrCreateClaimsTopic is ensureClaimsTopic; existed is false when
// this call created the topic (with claimsTopicConfigs).
func (s *LogStore) existOrCreateClaimsTopic(ctx context.Context) (existed bool, err error) {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.RequestTimeout)
	defer cancel()
	td, err := s.adm.ListTopics(ctx, s.cfg.ClaimsTopic)
	if err != nil {
		return false, kwalerr.Errorf("claims topic %q: %w", s.cfg.ClaimsTopic, err)
	}
	if d, ok := td[s.cfg.ClaimsTopic]; ok && d.Err == nil {
		return true, nil
	}
	if !s.cfg.AutoCreateTopics {
		return false, kwalerr.Errorf("claims topic %q does not exist (create it with one partition, or set AutoCreateTopics): %w", s.cfg.ClaimsTopic, ErrUnknownNamespace)
	}
	configs := make(map[string]*string, len(claimsTopicConfigs))
	for _, c := range claimsTopicConfigs {
		configs[c.key] = &c.want
	}
	resp, err := s.adm.CreateTopic(ctx, 1, s.cfg.ReplicationFactor, configs, s.cfg.ClaimsTopic)
	if err == nil {
		err = resp.Err
	}
	switch {
	case errors.Is(err, kerr.TopicAlreadyExists):
		return true, nil // another store created it meanwhile
	case err != nil:
		return false, kwalerr.Errorf("creating the claims topic %q: %w", s.cfg.ClaimsTopic, err)
	}
	return false, nil
}
