package kafka

import (
	"runtime"
	"runtime/debug"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/mod/module"
)

// kwalModule is kwal's module path, looked up in the build information of
// the binary that links the store (usually a datanode's, where kwal is a
// dependency).
const kwalModule = "github.com/kwal/kwal"

// newBuildInfo is kwal_build_info: 1, labeled with the kwal version the
// binary was built with, so that a dashboard can tell which store runs
// where.
func newBuildInfo() prometheus.Gauge {
	version, revision, goversion := kwalBuild(debug.ReadBuildInfo())
	g := prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "kwal_build_info",
		Help: "Always 1, labeled with the kwal module's version (\"(devel)\" from a checkout), the VCS revision it was built from (\"unknown\" when the build did not record it) and the Go version.",
		ConstLabels: prometheus.Labels{
			"version": version, "revision": revision, "goversion": goversion,
		},
	})
	g.Set(1)
	return g
}

// kwalBuild returns kwal's version and revision as recorded in bi, and
// the Go version. kwal is the main module when the binary is kwal's own
// (the CLI, its tests): the revision is then the VCS stamp. Otherwise it
// is a dependency: its version is the required one (or its replacement's),
// and its revision the commit a pseudo-version names.
func kwalBuild(bi *debug.BuildInfo, ok bool) (version, revision, goversion string) {
	version, revision, goversion = "unknown", "unknown", runtime.Version()
	if !ok || bi == nil {
		return version, revision, goversion
	}
	if bi.GoVersion != "" {
		goversion = bi.GoVersion
	}
	if bi.Main.Path == kwalModule {
		version = orUnknown(bi.Main.Version)
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" && s.Value != "" {
				revision = s.Value
			}
		}
		return version, revision, goversion
	}
	for _, m := range bi.Deps {
		if m.Path != kwalModule {
			continue
		}
		if m.Replace != nil {
			m = m.Replace
		}
		version = m.Version
		if version == "" {
			version = "(devel)" // replaced by a directory
		}
		return version, pseudoRevision(version), goversion
	}
	return version, revision, goversion
}

// pseudoRevision returns the commit a pseudo-version names
// (v0.0.0-20261130120000-0123456789ab), "unknown" for any other version.
func pseudoRevision(v string) string {
	if !module.IsPseudoVersion(v) {
		return "unknown"
	}
	rev, err := module.PseudoVersionRev(v)
	if err != nil {
		return "unknown"
	}
	return rev
}

func orUnknown(s string) string {
	if s == "" {
		return "unknown"
	}
	return s
}
