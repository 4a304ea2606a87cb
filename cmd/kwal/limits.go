package main

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/dustin/go-humanize"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// limit is the allowed range of one numeric flag. Every numeric flag of
// every command declares one (a test walks the command tree to make sure),
// and prepare checks them all before a command connects, deletes or
// allocates anything, so that a value out of range is an error naming the
// flag, its range and, for the upper bound, the reason: never a panic, a
// runaway allocation or a half-done run.
type limit struct {
	min, max uint64 // inclusive; durations in nanoseconds
	why      string // why the upper bound is where it is
}

// anyValue is the limit of a flag whose every value is valid (a seed, a
// region ID): declared so that the test knows it was considered.
var anyValue = limit{min: 0, max: math.MaxUint64}

// Units for the bounds.
const (
	kiB = 1 << 10
	miB = 1 << 20
	giB = 1 << 30
)

// bound declares the range [lo, hi] of the flag name of f.
func (a *app) bound(f *pflag.FlagSet, name string, lo, hi uint64, why string) {
	fl := f.Lookup(name)
	if fl == nil {
		panic("kwal: bound of an undefined flag --" + name) // a programming error, caught by every test
	}
	a.limits[fl] = limit{min: lo, max: hi, why: why}
}

// boundDuration declares the range [lo, hi] of a duration flag.
func (a *app) boundDuration(f *pflag.FlagSet, name string, lo, hi time.Duration, why string) {
	a.bound(f, name, uint64(lo), uint64(hi), why)
}

// numericFlag reports whether a flag holds numbers (and so needs a limit).
func numericFlag(f *pflag.Flag) bool {
	switch f.Value.Type() {
	case "int", "int8", "int16", "int32", "int64", "uint", "uint8", "uint16", "uint32", "uint64",
		"float32", "float64", "duration", "intSlice", "int32Slice", "int64Slice", "uintSlice",
		"float32Slice", "float64Slice", "durationSlice", "bytes":
		return true
	}
	return false
}

// checkLimits checks every numeric flag of cmd (its own and inherited)
// against its declared range and returns every violation.
func (a *app) checkLimits(cmd *cobra.Command) error {
	var errs []error
	cmd.Flags().VisitAll(func(f *pflag.Flag) {
		lim, ok := a.limits[f]
		if !ok {
			return
		}
		if err := lim.check(f); err != nil {
			errs = append(errs, err)
		}
	})
	if len(errs) > 1 {
		return linesError{errors.Join(errs...)} // one line per flag
	}
	return errors.Join(errs...)
}

// valueKind is how a flag's values are written, for messages.
type valueKind int

const (
	plainNumber valueKind = iota
	durationValue
	byteValue
)

func kindOf(f *pflag.Flag) valueKind {
	switch {
	case strings.HasPrefix(f.Value.Type(), "duration"):
		return durationValue
	case f.Value.Type() == "bytes":
		return byteValue
	}
	return plainNumber
}

// valueError says what is wrong with value as a value of flag f, in the
// words of its help (not in strconv's: 'parsing "1e3": invalid syntax').
func valueError(f *pflag.Flag, value string, cause error) error {
	what := ""
	switch t := f.Value.Type(); {
	case strings.HasPrefix(t, "duration"):
		what = "a duration (write it like 500ms, 30s or 2m)"
	case strings.HasPrefix(t, "int"), strings.HasPrefix(t, "uint"):
		what = "a whole number"
	case strings.HasPrefix(t, "float"):
		what = "a number"
	case t == "bool":
		what = "true or false"
	}
	if strings.HasSuffix(f.Value.Type(), "Slice") {
		what = "a comma-separated list of " + strings.TrimPrefix(what, "a ") + "s"
	}
	switch {
	case what == "":
		return fmt.Errorf("--%s: %q: %w", f.Name, value, cause)
	case errors.Is(cause, strconv.ErrRange):
		return fmt.Errorf("--%s: %q is too large or too small", f.Name, value)
	}
	return fmt.Errorf("--%s: %q is not %s", f.Name, value, what)
}

// check checks the flag's value (each value of a list).
func (l limit) check(f *pflag.Flag) error {
	kind := kindOf(f)
	if b, ok := f.Value.(*byteSize); ok {
		return l.checkNumber(f.Name, f.Value.String(), uint64(*b), kind)
	}
	vals := []string{f.Value.String()}
	if sv, ok := f.Value.(pflag.SliceValue); ok {
		vals = sv.GetSlice()
	}
	for _, v := range vals {
		if err := l.checkOne(f.Name, v, kind); err != nil {
			return err
		}
	}
	return nil
}

// checkOne checks one value as the flag holds it, written out.
func (l limit) checkOne(name, v string, kind valueKind) error {
	var n uint64
	switch {
	case kind == durationValue:
		d, err := time.ParseDuration(v)
		if err != nil {
			return fmt.Errorf("--%s: %q is not a duration", name, v)
		}
		if d < 0 {
			return l.outside(name, v, kind)
		}
		n = uint64(d)
	case strings.HasPrefix(v, "-"):
		return l.outside(name, v, kind)
	default:
		u, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			return fmt.Errorf("--%s: %q is not a whole number", name, v)
		}
		n = u
	}
	return l.checkNumber(name, v, n, kind)
}

// checkNumber checks n, written v.
func (l limit) checkNumber(name, v string, n uint64, kind valueKind) error {
	if n < l.min || n > l.max {
		err := l.outside(name, v, kind)
		if n > l.max && l.why != "" {
			err = fmt.Errorf("%w: %s", err, l.why)
		}
		return err
	}
	return nil
}

func (l limit) outside(name, v string, kind valueKind) error {
	return fmt.Errorf("--%s: %s is outside the allowed range %s", name, v, l.rangeText(kind))
}

// rangeText shows the range as the flag's values are written.
func (l limit) rangeText(kind valueKind) string {
	show := func(n uint64) string {
		switch {
		case kind == durationValue:
			return time.Duration(n).String()
		case kind == byteValue:
			return humanize.IBytes(n)
		case n == math.MaxInt64:
			return "2^63-1"
		case n == math.MaxUint64:
			return "2^64-1"
		case n >= miB && n%miB == 0:
			return fmt.Sprintf("%d (%d MiB)", n, n/miB)
		}
		return strconv.FormatUint(n, 10)
	}
	return fmt.Sprintf("[%s, %s]", show(l.min), show(l.max))
}

// annotateLimits appends each bounded flag's range to its help text.
func (a *app) annotateLimits() {
	for f, l := range a.limits {
		if l == anyValue {
			continue
		}
		f.Usage += " " + l.rangeText(kindOf(f))
	}
}
