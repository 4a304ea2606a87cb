package kafka

import (
	"runtime"
	"runtime/debug"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestKwalBuild protects kwal_build_info's labels in the binaries that
// link kwal: kwal's own (the VCS stamp), a datanode's requiring a tagged
// kwal or a pseudo-version (the commit it names), a datanode's replacing
// kwal by a directory, and a binary without build information.
func TestKwalBuild(t *testing.T) {
	dep := func(v string, replace *debug.Module) *debug.BuildInfo {
		return &debug.BuildInfo{GoVersion: "go1.99.1", Main: debug.Module{Path: "example.com/datanode", Version: "v1.2.3"},
			Deps: []*debug.Module{{Path: "github.com/other/mod", Version: "v0.1.0"}, {Path: kwalModule, Version: v, Replace: replace}}}
	}
	for _, c := range []struct {
		name                         string
		bi                           *debug.BuildInfo
		ok                           bool
		version, revision, goversion string
	}{
		{"kwal's own binary", &debug.BuildInfo{GoVersion: "go1.99.1", Main: debug.Module{Path: kwalModule, Version: "(devel)"},
			Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "4c377ce0123456789"}, {Key: "vcs.modified", Value: "false"}}},
			true, "(devel)", "4c377ce0123456789", "go1.99.1"},
		{"kwal's own binary, no VCS stamp", &debug.BuildInfo{GoVersion: "go1.99.1", Main: debug.Module{Path: kwalModule, Version: "(devel)"}},
			true, "(devel)", "unknown", "go1.99.1"},
		{"a tagged dependency", dep("v1.4.0", nil), true, "v1.4.0", "unknown", "go1.99.1"},
		{"a pseudo-version", dep("v0.0.0-20261130120000-0123456789ab", nil), true, "v0.0.0-20261130120000-0123456789ab", "0123456789ab", "go1.99.1"},
		{"a pseudo-version after a tag", dep("v1.4.1-0.20261130120000-0123456789ab", nil), true, "v1.4.1-0.20261130120000-0123456789ab", "0123456789ab", "go1.99.1"},
		{"a prerelease tag", dep("v1.5.0-rc-0123456789ab", nil), true, "v1.5.0-rc-0123456789ab", "unknown", "go1.99.1"},
		{"replaced by a directory", dep("v1.4.0", &debug.Module{Path: "../kwal"}), true, "(devel)", "unknown", "go1.99.1"},
		{"replaced by a fork's version", dep("v1.4.0", &debug.Module{Path: "example.com/fork", Version: "v1.4.1"}), true, "v1.4.1", "unknown", "go1.99.1"},
		{"no kwal in the build", &debug.BuildInfo{GoVersion: "go1.99.1", Main: debug.Module{Path: "example.com/x"}}, true, "unknown", "unknown", "go1.99.1"},
		{"no build information", nil, false, "unknown", "unknown", runtime.Version()},
	} {
		v, r, g := kwalBuild(c.bi, c.ok)
		require.Equal(t, []string{c.version, c.revision, c.goversion}, []string{v, r, g}, c.name)
	}
}
