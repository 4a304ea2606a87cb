package main

import (
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// envPrefix begins the environment variable of every flag: --foo-bar is
// also read from KWAL_FOO_BAR.
const envPrefix = "KWAL_"

// envName is the environment variable of a flag.
func envName(flag string) string {
	return envPrefix + strings.ToUpper(strings.ReplaceAll(flag, "-", "_"))
}

// applyEnv sets every flag that was not given on the command line from its
// environment variable (KWAL_<FLAG>), when that is set and not empty.
func applyEnv(fs *pflag.FlagSet, getenv func(string) string) error {
	var errs []error
	fs.VisitAll(func(f *pflag.Flag) {
		// A deprecated flag is an old name kept for command lines; its
		// variable may mean something else now (KWAL_SIZE is demo's total,
		// not chaos's old --size of an entry).
		if f.Changed || f.Name == "help" || f.Deprecated != "" {
			return
		}
		v := getenv(envName(f.Name))
		if strings.TrimSpace(v) == "" {
			return
		}
		if err := fs.Set(f.Name, v); err != nil {
			errs = append(errs, fmt.Errorf("environment variable %s: %w", envName(f.Name), valueError(f, v, err)))
		}
	})
	if len(errs) > 1 {
		return linesError{errors.Join(errs...)}
	}
	return errors.Join(errs...)
}

// annotateEnv appends each flag's environment variable to its help text.
func annotateEnv(root *cobra.Command) {
	seen := map[*pflag.Flag]bool{}
	var walk func(c *cobra.Command)
	note := func(f *pflag.Flag) {
		if seen[f] || f.Name == "help" || f.Deprecated != "" {
			return
		}
		seen[f] = true
		f.Usage += " [$" + envName(f.Name) + "]"
	}
	walk = func(c *cobra.Command) {
		c.PersistentFlags().VisitAll(note)
		c.Flags().VisitAll(note)
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
}
