package bench

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/encoding/protowire"
)

// field is one protobuf field of a message.
type field struct {
	num protowire.Number
	typ protowire.Type
	v   uint64 // varint and fixed64 values
	b   []byte // bytes values
}

func fields(t *testing.T, b []byte) []field {
	t.Helper()
	var out []field
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		require.GreaterOrEqual(t, n, 0, "tag")
		b = b[n:]
		f := field{num: num, typ: typ}
		switch typ {
		case protowire.VarintType:
			f.v, n = protowire.ConsumeVarint(b)
		case protowire.Fixed64Type:
			f.v, n = protowire.ConsumeFixed64(b)
		case protowire.BytesType:
			f.b, n = protowire.ConsumeBytes(b)
		default:
			t.Fatalf("unexpected wire type %v", typ)
		}
		require.GreaterOrEqual(t, n, 0, "field %d", num)
		b = b[n:]
		out = append(out, f)
	}
	return out
}

// TestDatanodePayload protects the datanode workload: each entry is one
// protobuf WalEntry holding one Put mutation of its region with the
// table's schema (timestamp, 3 tags, 4 fields) and rows of 8 values; rows
// advance in time within a region; sequences count up; entries stay
// within the entry size and fill it to within a row; the plan is
// deterministic.
func TestDatanodePayload(t *testing.T) {
	w := Workload{Topics: 2, Regions: 4, Writers: 2, EntrySize: 2048, EntriesPerCall: 3, Calls: 6, Seed: 5, Payload: PayloadDatanode}
	require.NoError(t, w.Validate())
	plan := w.Plan([]string{"a", "b"})
	require.Equal(t, plan, w.Plan([]string{"a", "b"}))
	lastTS := map[int64]uint64{}
	lastSeq := map[int64]uint64{}
	hosts := map[int64]map[string]bool{}
	for _, calls := range plan {
		for _, c := range calls {
			region := int64(c.Region)
			for _, e := range c.Entries {
				require.LessOrEqual(t, len(e), w.EntrySize)
				require.Greater(t, len(e), w.EntrySize-200, "filled to within a row")
				top := fields(t, e)
				require.Len(t, top, 1)
				require.Equal(t, protowire.Number(fWalMutations), top[0].num)
				mut := fields(t, top[0].b)
				require.Len(t, mut, 3)
				require.EqualValues(t, 1, mut[0].v, "op Put")
				require.Greater(t, mut[1].v, lastSeq[region], "sequences count up")
				lastSeq[region] = mut[1].v
				var schema, rows int
				for _, f := range fields(t, mut[2].b) {
					switch f.num {
					case fRowsSchema:
						schema++
					case fRowsRow:
						rows++
						vals := fields(t, f.b)
						require.Len(t, vals, 8)
						ts := fields(t, vals[0].b)[0].v
						require.GreaterOrEqual(t, ts, lastTS[region], "rows advance in time")
						lastTS[region] = ts
						host := string(fields(t, vals[1].b)[0].b)
						if hosts[region] == nil {
							hosts[region] = map[string]bool{}
						}
						hosts[region][host] = true
						x := math.Float64frombits(fields(t, vals[4].b)[0].v)
						require.Equal(t, math.Round(x*100)/100, x, "gauges at two decimals")
					}
				}
				require.Equal(t, 8, schema)
				require.Positive(t, rows)
			}
		}
	}
	for r, hs := range hosts {
		require.LessOrEqual(t, len(hs), datanodeHosts, "region %d: tags of low cardinality", r)
	}
	require.Error(t, Workload{Topics: 1, Regions: 1, Writers: 1, EntriesPerCall: 1, Calls: 1, Payload: "csv"}.Validate())
}
