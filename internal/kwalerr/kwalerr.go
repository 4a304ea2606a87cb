// Package kwalerr builds the texts of kwal's errors: one line that starts
// with "kwal: " once, the way os and net errors read ("open x: no such
// file or directory").
//
// The rule, for every package of the module:
//   - a sentinel's or a typed error's own text starts with Prefix, so that
//     it reads right when printed alone (errors.New("kwal: fenced"));
//   - an error built around other errors uses Errorf or Join: the result
//     starts with Prefix, and each error shown inside it is shown Bare
//     (without its own Prefix, on one line), while %w keeps it in the chain
//     for errors.Is and errors.As exactly as fmt.Errorf does;
//   - a foreign error that only restates a kwal sentinel (Kafka's
//     UNKNOWN_TOPIC_OR_PARTITION behind ErrUnknownNamespace) is attached
//     with Cause: reachable with errors.Is and errors.As, not printed.
package kwalerr

import (
	"errors"
	"fmt"
	"strings"
)

// Prefix starts the text of every error kwal returns.
const Prefix = "kwal: "

// Errorf is fmt.Errorf for kwal's errors: the text is Prefix and the
// formatted message, in which every error argument (%w, %v, %s or %q) is
// shown Bare, and the whole is one line. The errors of %w verbs are
// unwrapped as fmt.Errorf unwraps them (one: Unwrap() error; several:
// Unwrap() []error). A format that starts with Prefix gets no second one.
func Errorf(format string, args ...any) error {
	wrapped := fmt.Errorf(format, args...)
	if msg := wrapped.Error(); strings.HasPrefix(msg, Prefix) && strings.Count(msg, Prefix) == 1 && !strings.ContainsAny(msg, "\r\n") {
		return wrapped // already what the rule asks ("%w: detail" of a kwal sentinel): formatted once
	}
	shown, copied := args, false
	for i, a := range args {
		if e, ok := a.(error); ok && e != nil {
			if !copied { // the caller's slice stays as it was
				shown, copied = append([]any(nil), args...), true
			}
			shown[i] = bare{e}
		}
	}
	msg := Prefix + oneLine(strings.TrimPrefix(fmt.Errorf(format, shown...).Error(), Prefix))
	switch u := wrapped.(type) {
	case interface{ Unwrap() error }:
		return &wrapError{msg: msg, err: u.Unwrap()}
	case interface{ Unwrap() []error }:
		return &wrapErrors{msg: msg, errs: u.Unwrap()}
	}
	return errors.New(msg)
}

// Bare is err's text as a part of another error's: without a leading
// Prefix, and on one line (line breaks become "; "). A nil err is "".
func Bare(err error) string {
	if err == nil {
		return ""
	}
	return oneLine(strings.TrimPrefix(err.Error(), Prefix))
}

// Join is errors.Join on one line: nil when every err is nil; otherwise an
// error whose text is Prefix and the Bare texts of the non-nil errors
// separated by "; ", and whose Unwrap returns them all.
func Join(errs ...error) error {
	var kept []error
	for _, err := range errs {
		if err != nil {
			kept = append(kept, err)
		}
	}
	if len(kept) == 0 {
		return nil
	}
	return &joinError{errs: kept}
}

// Cause returns an error that reads as err and unwraps to both err and
// cause: for a foreign error (a Kafka error code) that err restates in
// kwal's words, kept for errors.Is and errors.As but not printed a second
// time. A nil cause returns err; a nil err returns nil.
func Cause(err, cause error) error {
	if err == nil || cause == nil {
		return err
	}
	return &causeError{err: err, cause: cause}
}

// bare shows an error argument of Errorf without its prefix.
type bare struct{ err error }

func (b bare) Error() string { return Bare(b.err) }

// oneLine turns the line breaks of s into "; ", dropping the blank lines
// and the indentation of the others.
func oneLine(s string) string {
	if !strings.ContainsAny(s, "\r\n") {
		return s
	}
	lines := strings.FieldsFunc(s, func(r rune) bool { return r == '\n' || r == '\r' })
	kept := lines[:0]
	for _, l := range lines {
		if l = strings.TrimSpace(l); l != "" {
			kept = append(kept, strings.TrimPrefix(l, Prefix))
		}
	}
	return strings.Join(kept, "; ")
}

type wrapError struct {
	msg string
	err error
}

func (e *wrapError) Error() string { return e.msg }
func (e *wrapError) Unwrap() error { return e.err }

type wrapErrors struct {
	msg  string
	errs []error
}

func (e *wrapErrors) Error() string   { return e.msg }
func (e *wrapErrors) Unwrap() []error { return e.errs }

type joinError struct{ errs []error }

func (e *joinError) Error() string {
	parts := make([]string, len(e.errs))
	for i, err := range e.errs {
		parts[i] = Bare(err)
	}
	return Prefix + strings.Join(parts, "; ")
}

func (e *joinError) Unwrap() []error { return e.errs }

type causeError struct{ err, cause error }

func (e *causeError) Error() string   { return Prefix + Bare(e.err) }
func (e *causeError) Unwrap() []error { return []error{e.err, e.cause} }
