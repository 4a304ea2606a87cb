package main

import (
	"runtime/debug"
	"strings"
)

// version is what kwal --version prints: the module version (a tag when
// installed with go install module@version, "(devel)" from a checkout)
// and the VCS revision and time the binary was built from, when the build
// recorded them.
func version() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown (no build information)"
	}
	parts := []string{bi.Main.Version}
	var rev, at, modified string
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.time":
			at = s.Value
		case "vcs.modified":
			modified = s.Value
		}
	}
	if rev != "" {
		if len(rev) > 12 {
			rev = rev[:12]
		}
		if modified == "true" {
			rev += " (modified)"
		}
		parts = append(parts, "revision "+rev)
	}
	if at != "" {
		parts = append(parts, "committed "+at)
	}
	return strings.Join(parts, ", ") + ", " + bi.GoVersion
}
