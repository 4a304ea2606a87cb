package main

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"time"
)

// runStamp names one run's namespaces: the time to the second and a
// random suffix, so that runs within one second differ.
func runStamp() string {
	return fmt.Sprintf("%s-%04x", time.Now().Format("20060102-150405"), rand.Uint32()&0xffff)
}

// ---- formatting ---------------------------------------------------------

func mb(b int64) float64 { return float64(b) / 1e6 }

func humanBytes(b int64) string {
	switch {
	case b >= 1e9:
		return fmt.Sprintf("%.2f GB", float64(b)/1e9)
	case b >= 1e6:
		return fmt.Sprintf("%.1f MB", float64(b)/1e6)
	case b >= 1e3:
		return fmt.Sprintf("%.1f kB", float64(b)/1e3)
	}
	return fmt.Sprintf("%d B", b)
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// plural is n followed by the noun in the number n calls for: "1 entry",
// "0 entries", "2 entries".
func plural[N ~int | ~int64 | ~uint64](n N, one, many string) string {
	if n == 1 {
		return fmt.Sprintf("%d %s", n, one)
	}
	return fmt.Sprintf("%d %s", n, many)
}

func roundDur(d time.Duration) time.Duration {
	switch {
	case d >= time.Second:
		return d.Round(time.Millisecond)
	case d >= time.Millisecond:
		return d.Round(10 * time.Microsecond)
	}
	return d.Round(time.Microsecond)
}

// quantile returns the q-quantile of sorted durations.
func quantile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[int(q*float64(len(sorted)-1))]
}

// preview renders the first n bytes of data: quoted when printable, hex
// otherwise, or a quoted printable prefix (of 3 bytes or more) followed by
// the rest in hex.
func preview(data []byte, n int) string {
	n = max(n, 0) // --bytes is bounded; a negative n shows nothing rather than panic
	p := data[:min(len(data), n)]
	k := 0
	for k < len(p) && p[k] >= 0x20 && p[k] <= 0x7e {
		k++
	}
	more := ""
	if len(data) > n {
		more = "…"
	}
	switch {
	case k == len(p):
		return strconv.Quote(string(p)) + more
	case k >= 3:
		return fmt.Sprintf("%s %x%s", strconv.Quote(string(p[:k])), p[k:], more)
	}
	return fmt.Sprintf("%x%s", p, more)
}
