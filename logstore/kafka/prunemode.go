package kafka

import (
	"context"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kwal/kwal/internal/kwalerr"
)

// Config.PruneMode values.
const (
	// PruneDelete: Prune writes a prune mark, then deletes below it with
	// DeleteRecords.
	PruneDelete = "delete"
	// PruneMarkOnly: Prune writes the prune mark only and leaves the
	// deletion to the topic's retention, for clusters that refuse
	// DeleteRecords.
	PruneMarkOnly = "mark-only"
)

// ErrDeleteRefused is matched by Prune's error (a *DeleteRefusedError) when
// the cluster refuses DeleteRecords.
var ErrDeleteRefused = errors.New("kwal: the cluster refuses DeleteRecords")

// DeleteRefusedError is Prune's error under PruneDelete when the cluster
// refuses DeleteRecords: a policy (POLICY_VIOLATION), an ACL
// (TOPIC_AUTHORIZATION_FAILED, CLUSTER_AUTHORIZATION_FAILED), or brokers
// that do not serve the request (UNSUPPORTED_VERSION, INVALID_REQUEST, or
// none of them lists it in ApiVersions), as some managed Kafka services do.
// Nothing was deleted. The prune mark written before stays valid: every
// store knows what is obsolete, and the mark vouches for the records below
// Below when the topic's retention deletes them. Such a cluster needs
// Config.PruneMode PruneMarkOnly. It matches ErrDeleteRefused and the
// broker's error (Err).
type DeleteRefusedError struct {
	Namespace string
	// Below is the offset Prune was deleting below (the prune point).
	Below int64
	Err   error
}

func (e *DeleteRefusedError) Error() string {
	return fmt.Sprintf("%sprune %q: the cluster refuses DeleteRecords (%s); nothing was deleted and the prune mark below offset %d stays valid: set Config.PruneMode to %q (kwal --prune-mode %s) to leave deletion to the topic's retention",
		kwalerr.Prefix, e.Namespace, kwalerr.Bare(e.Err), e.Below, PruneMarkOnly, PruneMarkOnly)
}

func (e *DeleteRefusedError) Unwrap() []error { return []error{ErrDeleteRefused, e.Err} }

// refusalCodes are the errors a broker answers DeleteRecords with when it
// does not let this client delete records at all, whatever the offset or
// the moment: retrying cannot help.
var refusalCodes = []error{
	kerr.PolicyViolation,
	kerr.TopicAuthorizationFailed,
	kerr.ClusterAuthorizationFailed,
	kerr.UnsupportedVersion,
	kerr.InvalidRequest,
}

// deleteRefused reports whether err, a failed DeleteRecords, is a refusal
// (see DeleteRefusedError). An error with none of refusalCodes may come
// from the client itself, which does not send a request that no broker
// lists in its ApiVersions; the brokers are asked then (only on this
// failure path).
func (s *LogStore) deleteRefused(ctx context.Context, err error) bool {
	for _, code := range refusalCodes {
		if errors.Is(err, code) {
			return true
		}
	}
	var ke *kerr.Error
	if errors.As(err, &ke) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false // a broker answered, or the call ran out of time
	}
	ctx, cancel := context.WithTimeout(ctx, s.cfg.RequestTimeout)
	defer cancel()
	vs, verr := s.adm.ApiVersions(ctx)
	if verr != nil || len(vs) == 0 {
		return false
	}
	for _, v := range vs {
		if v.Err != nil {
			return false // cannot tell
		}
		if _, _, ok := v.KeyVersions(kmsg.DeleteRecords.Int16()); ok {
			return false
		}
	}
	return true
}
