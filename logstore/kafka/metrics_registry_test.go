package kafka_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/kwal/kwal/logstore"
	"github.com/kwal/kwal/logstore/kafka"
	"github.com/kwal/kwal/testutil"
)

// seriesOf lists every series reg exports as name{labels}, sorted.
func seriesOf(t *testing.T, reg prometheus.Gatherer) []string {
	t.Helper()
	mfs, err := reg.Gather()
	require.NoError(t, err, "no duplicate or inconsistent series")
	var out []string
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			var ls []string
			for _, l := range m.GetLabel() {
				ls = append(ls, l.GetName()+"="+l.GetValue())
			}
			out = append(out, mf.GetName()+"{"+strings.Join(ls, ",")+"}")
		}
	}
	sort.Strings(out)
	return out
}

// TestTwoStoresOnOneWrappedRegistry protects the way Config.Registerer
// documents for several stores in one process: each on the registry
// wrapped with a store label of its own. Both open, every series is there
// once per store, each counts its own work, and closing one leaves the
// other's.
func TestTwoStoresOnOneWrappedRegistry(t *testing.T) {
	brokers := testutil.Brokers(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	reg := prometheus.NewRegistry()
	wrapped := func(name string) func(*kafka.Config) {
		return func(c *kafka.Config) {
			c.Registerer = prometheus.WrapRegistererWith(prometheus.Labels{"store": name}, reg)
			c.IndexDir = t.TempDir()
		}
	}
	a := openStore(t, brokers, wrapped("a"))
	b := openStore(t, brokers, wrapped("b"))
	ns := newTopic(t)
	for i, s := range []*kafka.LogStore{a, b} {
		for range i + 2 {
			_, err := s.AppendBatch(ctx, []logstore.Entry{{Namespace: ns, Region: logstore.RegionID(i + 1), Data: []byte("x")}})
			require.NoError(t, err)
		}
	}
	for store, want := range map[string]float64{"a": 2, "b": 3} {
		n, found := metricSum(t, reg, "kwal_append_entries_total", "store", store)
		require.True(t, found, store)
		require.Equal(t, want, n, "store %s counts its own appends", store)
	}
	all := seriesOf(t, reg)
	for _, name := range []string{"kwal_build_info", "kwal_index_watermark", "kwal_client_connects_total", "kwal_refused_calls_total"} {
		for _, store := range []string{"a", "b"} {
			require.True(t, slices.ContainsFunc(all, func(s string) bool {
				return strings.HasPrefix(s, name+"{") && strings.Contains(s, "store="+store)
			}), "%s of store %s", name, store)
		}
	}
	require.NoError(t, a.Close())
	for _, s := range seriesOf(t, reg) {
		require.NotContains(t, s, "store=a", "closing a leaves only b's series")
	}
	n, _ := metricSum(t, reg, "kwal_append_entries_total", "store", "b")
	require.Equal(t, 3.0, n)
}

// TestTwoStoresOnOneRegistryFail protects the other side: a second store
// on the same registerer fails Open with one line that names the metric
// and says how to share a registry, and leaves nothing behind: the first
// store's series are unchanged, and once it closes the registry is empty.
func TestTwoStoresOnOneRegistryFail(t *testing.T) {
	brokers := testutil.Brokers(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, tc := range []struct {
		name string
		reg  func(*prometheus.Registry) prometheus.Registerer
	}{
		{"unwrapped", func(r *prometheus.Registry) prometheus.Registerer { return r }},
		{"wrapped with the same label", func(r *prometheus.Registry) prometheus.Registerer {
			return prometheus.WrapRegistererWith(prometheus.Labels{"store": "same"}, r)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			reg := prometheus.NewRegistry()
			first := openStore(t, brokers, func(c *kafka.Config) { c.Registerer = tc.reg(reg) })
			ns := newTopic(t)
			_, err := first.AppendBatch(ctx, []logstore.Entry{{Namespace: ns, Region: 1, Data: []byte("x")}})
			require.NoError(t, err)
			before := seriesOf(t, reg)

			cfg := kafka.DefaultConfig()
			cfg.Brokers, cfg.Registerer = brokers, tc.reg(reg)
			second, err := kafka.Open(ctx, cfg)
			if second != nil {
				_ = second.Close()
			}
			require.Error(t, err)
			msg := err.Error()
			require.NotContains(t, msg, "\n", "one line")
			require.Regexp(t, `^kwal: metric kwal_[a-z_]+ is already registered on Config\.Registerer: `, msg)
			require.Contains(t, msg, `several stores on one registry must each get prometheus.WrapRegistererWith(prometheus.Labels{"store": "..."}, reg)`)
			var are prometheus.AlreadyRegisteredError
			require.True(t, errors.As(err, &are), "the registry's error is wrapped")

			require.Equal(t, before, seriesOf(t, reg), "the failed Open registered nothing and unregistered nothing")
			_, err = first.AppendBatch(ctx, []logstore.Entry{{Namespace: ns, Region: 1, Data: []byte("y")}})
			require.NoError(t, err)
			n, _ := metricSum(t, reg, "kwal_append_entries_total", "namespace", ns)
			require.Equal(t, 2.0, n, "the first store's series still count")
			require.NoError(t, first.Close())
			mfs, err := reg.Gather()
			require.NoError(t, err)
			require.Empty(t, mfs, fmt.Sprintf("nothing left on the registry: %v", seriesOf(t, reg)))
		})
	}
}
