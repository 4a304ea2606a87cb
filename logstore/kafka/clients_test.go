package kafka

import (
	"bytes"
	"log/slog"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestFranzLogsOneLevelDown protects how franz-go's logs reach kwal's
// logger: its info becomes debug (and is not even built unless the logger
// takes debug), its warnings and errors keep their level, every message is
// marked "franz-go: ", and the logger's own attributes stay.
func TestFranzLogsOneLevelDown(t *testing.T) {
	for _, tc := range []struct {
		handler slog.Level
		want    kgo.LogLevel
		logged  map[kgo.LogLevel]string // franz-go level -> slog level printed; absent: dropped
	}{
		{slog.LevelDebug, kgo.LogLevelDebug, map[kgo.LogLevel]string{
			kgo.LogLevelDebug: "DEBUG", kgo.LogLevelInfo: "DEBUG", kgo.LogLevelWarn: "WARN", kgo.LogLevelError: "ERROR"}},
		{slog.LevelInfo, kgo.LogLevelWarn, map[kgo.LogLevel]string{
			kgo.LogLevelWarn: "WARN", kgo.LogLevelError: "ERROR"}},
		{slog.LevelWarn, kgo.LogLevelWarn, map[kgo.LogLevel]string{
			kgo.LogLevelWarn: "WARN", kgo.LogLevelError: "ERROR"}},
		{slog.LevelError, kgo.LogLevelError, map[kgo.LogLevel]string{
			kgo.LogLevelError: "ERROR"}},
	} {
		var buf bytes.Buffer
		l := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{
			Level: tc.handler,
			ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
				if a.Key == slog.TimeKey {
					return slog.Attr{}
				}
				return a
			},
		})).With("store", "s1")
		fl := franzLogger(l)
		require.Equal(t, tc.want, fl.Level(), "handler at %v", tc.handler)
		for _, level := range []kgo.LogLevel{kgo.LogLevelDebug, kgo.LogLevelInfo, kgo.LogLevelWarn, kgo.LogLevelError} {
			buf.Reset()
			fl.Log(level, "something happened", "broker", 1)
			printed, ok := tc.logged[level]
			if !ok {
				require.Empty(t, buf.String(), "handler at %v, franz-go %v", tc.handler, level)
				continue
			}
			require.Equal(t, `level=`+printed+` msg="franz-go: something happened" store=s1 broker=1`+"\n", buf.String(),
				"handler at %v, franz-go %v", tc.handler, level)
		}
	}
}
