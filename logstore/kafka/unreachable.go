package kafka

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kwal/kwal/internal/kwalerr"
)

// ErrUnreachable matches Open's failure to reach the cluster: no seed
// broker answered. The error also matches the sentinel of what happened
// (ErrRefused, ErrAuthFailed, ErrTLS, ErrBrokerTimeout; none when the
// cause is another one), and wraps franz-go's error.
var ErrUnreachable = errors.New("kwal: no broker reachable")

// What Open found when it could not reach a broker. Each comes with
// ErrUnreachable.
var (
	// ErrRefused: the connection was refused (nothing listens at the
	// address). Learnt at once, not after a timeout.
	ErrRefused = errors.New("kwal: connection refused")
	// ErrAuthFailed: a broker refused the SASL credentials or mechanism.
	ErrAuthFailed = errors.New("kwal: SASL authentication failed")
	// ErrTLS: the TLS handshake failed (an unknown certificate authority,
	// a name mismatch, or no TLS at the other end).
	ErrTLS = errors.New("kwal: TLS handshake failed")
	// ErrBrokerTimeout: no broker answered within RequestTimeout (or
	// DialTimeout for the connection).
	ErrBrokerTimeout = errors.New("kwal: no answer in time")
)

// unreachableError is Open's failure to reach the brokers.
type unreachableError struct {
	brokers []string
	reason  error // one of the sentinels above, or nil
	timeout time.Duration
	err     error // franz-go's
}

func (e *unreachableError) Error() string {
	switch e.reason {
	case ErrBrokerTimeout:
		return fmt.Sprintf("kwal: no broker of %v answered within %v: %s", e.brokers, e.timeout, kwalerr.Bare(e.err))
	case nil:
		return fmt.Sprintf("kwal: no broker of %v reachable: %s", e.brokers, kwalerr.Bare(e.err))
	default:
		return fmt.Sprintf("kwal: no broker of %v reachable: %s: %s", e.brokers, kwalerr.Bare(e.reason), kwalerr.Bare(e.err))
	}
}

func (e *unreachableError) Is(target error) bool {
	return target == ErrUnreachable || (e.reason != nil && target == e.reason)
}

func (e *unreachableError) Unwrap() error { return e.err }

// Ping checks that a broker of cfg.Brokers answers cl (a client made with
// ClientOptions(cfg), or one of the store's) within cfg.RequestTimeout, as
// Open does. Its error matches ErrUnreachable and what happened, unless ctx
// ended first: then it matches ctx's error, and says nothing of the
// brokers.
func Ping(ctx context.Context, cl *kgo.Client, cfg Config) error {
	pctx, cancel := context.WithTimeout(ctx, cfg.RequestTimeout)
	defer cancel()
	err := cl.Ping(pctx)
	switch {
	case err == nil:
		return nil
	case ctx.Err() != nil:
		return kwalerr.Errorf("reaching a broker of %v: %w", cfg.Brokers, err)
	}
	return &unreachableError{brokers: cfg.Brokers, reason: unreachableReason(err), timeout: cfg.RequestTimeout, err: err}
}

func unreachableReason(err error) error {
	var (
		verify  *tls.CertificateVerificationError
		unknown x509.UnknownAuthorityError
		host    x509.HostnameError
		header  tls.RecordHeaderError
		alert   tls.AlertError
		op      *net.OpError
	)
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		return ErrRefused
	case errors.Is(err, kerr.SaslAuthenticationFailed), errors.Is(err, kerr.UnsupportedSaslMechanism),
		errors.Is(err, kerr.IllegalSaslState):
		return ErrAuthFailed
	case errors.As(err, &verify), errors.As(err, &unknown), errors.As(err, &host),
		errors.As(err, &header), errors.As(err, &alert):
		return ErrTLS
	case errors.As(err, &op) && op.Op == "remote error":
		// crypto/tls reports an alert the broker sent (a client
		// certificate it refused under mutual TLS: "remote error: tls:
		// bad certificate") as a net.OpError of this Op around its
		// unexported alert type; tls.AlertError is QUIC's.
		return ErrTLS
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, os.ErrDeadlineExceeded):
		return ErrBrokerTimeout
	}
	var ne interface{ Timeout() bool }
	if errors.As(err, &ne) && ne.Timeout() {
		return ErrBrokerTimeout
	}
	return nil
}
