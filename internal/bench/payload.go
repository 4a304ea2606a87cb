package bench

import (
	"fmt"
	"math"
	"math/rand/v2"

	"google.golang.org/protobuf/encoding/protowire"
)

// Payloads a workload's entries can hold.
const (
	// PayloadRandom is random bytes: incompressible, the worst case for
	// compression and the cheapest to generate.
	PayloadRandom = "random"
	// PayloadDatanode is what a datanode's WAL holds: each entry is one
	// batch of row mutations of its region, a shard of one table, encoded
	// as protobuf in the shape of GreptimeDB's WalEntry (one Mutation of
	// op Put with a sequence and Rows: the column schema, then rows of
	// values). The table is a metrics table: a millisecond timestamp,
	// three string tags of low cardinality (host, dc, service) and four
	// float fields that move as gauges do, at two decimals.
	PayloadDatanode = "datanode"
)

// Payloads lists the payloads, for flags.
var Payloads = []string{PayloadRandom, PayloadDatanode}

// ValidPayload reports an unknown payload ("" is random).
func ValidPayload(p string) error {
	switch p {
	case "", PayloadRandom, PayloadDatanode:
		return nil
	}
	return fmt.Errorf("bench: payload %q is not one of %v", p, Payloads)
}

// Wire field numbers of the datanode payload's messages. The shape is
// GreptimeDB's (api/v1/wal.proto, row.proto); the numbers are ours.
const (
	fWalMutations = 1 // WalEntry.mutations: Mutation

	fMutOp   = 1 // Mutation.op_type: varint, 1 = Put
	fMutSeq  = 2 // Mutation.sequence: varint
	fMutRows = 3 // Mutation.rows: Rows

	fRowsSchema = 1 // Rows.schema: ColumnSchema
	fRowsRow    = 2 // Rows.rows: Row

	fColName     = 1 // ColumnSchema.column_name
	fColType     = 2 // ColumnSchema.datatype: varint
	fColSemantic = 3 // ColumnSchema.semantic_type: varint (0 tag, 1 field, 2 timestamp)

	fRowValue = 1 // Row.values: Value

	fValString = 12 // Value.string_value
	fValF64    = 11 // Value.f64_value: fixed64
	fValTsMs   = 16 // Value.timestamp_millisecond_value: varint
)

// Column data types (GreptimeDB's ColumnDataType numbering).
const (
	typeFloat64 = 10
	typeString  = 12
	typeTsMs    = 16
)

var (
	datanodeTags   = []string{"host", "dc", "service"}
	datanodeFields = []string{"cpu_user", "cpu_system", "mem_used_bytes", "disk_io_bytes"}
	datanodeSchema = datanodeSchemaBytes()
)

func datanodeSchemaBytes() []byte {
	col := func(b []byte, name string, typ, semantic uint64) []byte {
		var c []byte
		c = protowire.AppendTag(c, fColName, protowire.BytesType)
		c = protowire.AppendString(c, name)
		c = protowire.AppendTag(c, fColType, protowire.VarintType)
		c = protowire.AppendVarint(c, typ)
		c = protowire.AppendTag(c, fColSemantic, protowire.VarintType)
		c = protowire.AppendVarint(c, semantic)
		b = protowire.AppendTag(b, fRowsSchema, protowire.BytesType)
		return protowire.AppendBytes(b, c)
	}
	var b []byte
	b = col(b, "ts", typeTsMs, 2)
	for _, t := range datanodeTags {
		b = col(b, t, typeString, 0)
	}
	for _, f := range datanodeFields {
		b = col(b, f, typeFloat64, 1)
	}
	return b
}

// datanodeHosts is the hosts one region (shard) holds rows of.
const datanodeHosts = 16

// regionRows generates one region's rows in time order: each host reports
// once a second, its gauges moving by small random steps.
type regionRows struct {
	region int
	seq    uint64
	ts     int64 // ms
	host   int   // next host to report at ts
	gauges [datanodeHosts][4]float64
	names  [datanodeHosts][3]string
}

func newRegionRows(region int, rng *rand.Rand) *regionRows {
	g := &regionRows{region: region, ts: 1_767_225_600_000 + int64(region)*7}
	for h := range datanodeHosts {
		g.names[h] = [3]string{
			fmt.Sprintf("host-%04d-%02d", region, h),
			fmt.Sprintf("dc-%d", (region+h)%3),
			[]string{"api", "ingest", "query", "compact", "meta"}[(region*datanodeHosts+h)%5],
		}
		g.gauges[h] = [4]float64{rng.Float64() * 50, rng.Float64() * 20, 1e9 + rng.Float64()*8e9, rng.Float64() * 1e7}
	}
	return g
}

// row appends the next row's encoding (a Row message, tagged) to b.
func (g *regionRows) row(b []byte, rng *rand.Rand) []byte {
	h := g.host
	var r []byte
	val := func(field protowire.Number, typ protowire.Type, add func([]byte) []byte) {
		var v []byte
		v = protowire.AppendTag(v, field, typ)
		v = add(v)
		r = protowire.AppendTag(r, fRowValue, protowire.BytesType)
		r = protowire.AppendBytes(r, v)
	}
	val(fValTsMs, protowire.VarintType, func(v []byte) []byte { return protowire.AppendVarint(v, uint64(g.ts)) })
	for _, s := range g.names[h] {
		val(fValString, protowire.BytesType, func(v []byte) []byte { return protowire.AppendString(v, s) })
	}
	scale := [4]float64{0.5, 0.2, 5e6, 2e5}
	for i := range g.gauges[h] {
		x := math.Max(0, g.gauges[h][i]+(rng.Float64()-0.5)*scale[i])
		x = math.Round(x*100) / 100
		g.gauges[h][i] = x
		val(fValF64, protowire.Fixed64Type, func(v []byte) []byte { return protowire.AppendFixed64(v, math.Float64bits(x)) })
	}
	g.host++
	if g.host == datanodeHosts {
		g.host = 0
		g.ts += 1000
	}
	b = protowire.AppendTag(b, fRowsRow, protowire.BytesType)
	return protowire.AppendBytes(b, r)
}

// entry encodes the region's next mutation: as many rows as keep the
// entry within size bytes (one at the least).
func (g *regionRows) entry(size int, rng *rand.Rand) []byte {
	g.seq++
	rows := append([]byte(nil), datanodeSchema...)
	// The mutation and entry framing: tags, lengths (at most 3 bytes each
	// below 2 MiB) and the op and sequence.
	const framing = 2*(1+3) + 2 + 1 + 10
	for {
		before := len(rows)
		rows = g.row(rows, rng)
		if len(rows)+framing > size && before > len(datanodeSchema) {
			rows = rows[:before] // the row goes in the next entry
			g.unrow()
			break
		}
		if len(rows)+framing >= size {
			break
		}
	}
	var m []byte
	m = protowire.AppendTag(m, fMutOp, protowire.VarintType)
	m = protowire.AppendVarint(m, 1)
	m = protowire.AppendTag(m, fMutSeq, protowire.VarintType)
	m = protowire.AppendVarint(m, g.seq)
	m = protowire.AppendTag(m, fMutRows, protowire.BytesType)
	m = protowire.AppendBytes(m, rows)
	var e []byte
	e = protowire.AppendTag(e, fWalMutations, protowire.BytesType)
	return protowire.AppendBytes(e, m)
}

// unrow steps back over the row last generated, so that it is generated
// again (with new gauge steps) for the next entry.
func (g *regionRows) unrow() {
	if g.host == 0 {
		g.host = datanodeHosts - 1
		g.ts -= 1000
		return
	}
	g.host--
}
