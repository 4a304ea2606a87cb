package kafka_test

import (
	"reflect"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kwal/kwal/logstore/kafka"
)

// TestConfigStringNamesEveryField protects the "store open" log line: it
// prints every Config field as Name=value, so a field added to Config and
// forgotten in String fails here. The password is the one value it must
// not print.
func TestConfigStringNamesEveryField(t *testing.T) {
	cfg := kafka.DefaultConfig()
	cfg.TLS = &kafka.TLSConfig{CAFile: "ca.pem", CertFile: "c.pem", KeyFile: "k.pem", ServerName: "kafka-1", InsecureSkipVerify: true}
	cfg.SASL = &kafka.SASLConfig{Mechanism: kafka.SASLPlain, Username: "kwal", Password: "hunter2"}
	out := " " + cfg.String()
	ct := reflect.TypeFor[kafka.Config]()
	for f := range ct.Fields() {
		require.Contains(t, out, " "+f.Name+"=", "Config.%s is missing from String", f.Name)
	}
	// The sub-structs' fields: each value set above must show.
	for _, v := range []string{"ca.pem", "c.pem", "k.pem", "kafka-1", "Insecure=true", kafka.SASLPlain, `"kwal"`} {
		require.Contains(t, out, v)
	}
	require.Equal(t, 5, reflect.TypeFor[kafka.TLSConfig]().NumField(), "a TLSConfig field was added: print it in Config.String and list it above")
	require.Equal(t, 3, reflect.TypeFor[kafka.SASLConfig]().NumField(), "a SASLConfig field was added: print it in Config.String (unless secret) and list it above")
	require.NotContains(t, out, "hunter2")

	// Nil pointers and interfaces print as nil, not as a panic.
	var zero kafka.Config
	for _, name := range []string{"TLS", "SASL", "IndexStore", "Dialer", "Registerer", "Logger"} {
		require.Contains(t, " "+zero.String(), " "+name+"=nil")
	}
}

// TestFetchChunkBytes: a read's fetch connections are its lanes' and the
// admin client's, and a chunk is FetchMaxBytes spread over them, never less
// than a batch (the benchmark's floors size their fetches with the same
// methods the fetcher does).
func TestFetchChunkBytes(t *testing.T) {
	c := kafka.DefaultConfig()
	require.Equal(t, c.ProduceLanes+1, c.FetchConnections())
	c.ProduceLanes, c.FetchMaxBytes, c.MaxBatchBytes = 3, 64<<20, 1<<20
	require.Equal(t, 4, c.FetchConnections())
	require.EqualValues(t, 16<<20, c.FetchChunkBytes())
	c.ProduceLanes = 255
	require.EqualValues(t, 1<<20, c.FetchChunkBytes(), "at least one batch")
}
