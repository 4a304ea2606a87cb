package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"path"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/kwal/kwal/logstore/kafka"
)

const deleteLong = `delete deletes namespaces with every entry in them (their topic) and their
index in --index-dir. Each argument is a name or a glob pattern (*, ?, [...],
as in path.Match): a prefix is the pattern PREFIX*, for example
'kwal-bench-*' (quote it, so that the shell leaves it alone).

A name that matches nothing is an error; so is a pattern. What a pattern
matches is listed and deleted only after a confirmation: a yes on the
terminal, or --yes. A namespace that has an index but no topic (its topic
was deleted by other means) has its index deleted, and is reported so.`

// deleteOpts are the flags of namespaces delete.
type deleteOpts struct {
	yes bool
}

func (a *app) namespacesDeleteCmd() *cobra.Command {
	var o deleteOpts
	cmd := &cobra.Command{
		Use:   "delete NAME|PATTERN...",
		Short: "Delete namespaces (names, or glob patterns with a confirmation) with every entry in them, and their index",
		Long:  deleteLong,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return fmt.Errorf("%s: name at least one namespace or pattern", commandName(cmd))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.withStore(cmd.Context(), func(ctx context.Context, st *kafka.LogStore) error {
				return a.deleteNamespaces(ctx, st, args, o)
			})
		},
	}
	cmd.Flags().BoolVarP(&o.yes, "yes", "y", false, "delete what the patterns match without asking")
	return cmd
}

// isPattern reports whether arg is a glob pattern rather than a name
// (topic names never hold these characters).
func isPattern(arg string) bool { return strings.ContainsAny(arg, `*?[\`) }

func (a *app) deleteNamespaces(ctx context.Context, st *kafka.LogStore, args []string, o deleteOpts) error {
	topics, err := st.ListNamespaces(ctx)
	if err != nil {
		return err
	}
	indexed, err := a.indexedTopics()
	if err != nil {
		return err
	}
	known := slices.Compact(slices.Sorted(slices.Values(append(slices.Clone(topics), indexed...))))

	var names []string // to delete, in order, once each
	patterns := false
	for _, arg := range args {
		var matched []string
		if isPattern(arg) {
			patterns = true
			if _, err := path.Match(arg, ""); err != nil {
				return fmt.Errorf("%q is not a valid pattern: %w", arg, err)
			}
			for _, n := range known {
				if ok, _ := path.Match(arg, n); ok {
					matched = append(matched, n)
				}
			}
			if len(matched) == 0 {
				return fmt.Errorf("no namespace matches %q (nothing was deleted)", arg)
			}
		} else {
			if arg == a.g.claimsTopic || strings.HasPrefix(arg, "__") {
				// Not a namespace, whether or not the topic exists: the
				// store says why (deleting the claims topic would forget
				// every region's claims).
				return st.DeleteNamespace(ctx, arg)
			}
			if !slices.Contains(known, arg) {
				return fmt.Errorf("no namespace %s: no such topic, and no index of it in %s (nothing was deleted)", arg, a.indexDir())
			}
			matched = []string{arg}
		}
		for _, n := range matched {
			if !slices.Contains(names, n) {
				names = append(names, n)
			}
		}
	}
	if patterns && !o.yes {
		if err := a.confirm(names); err != nil {
			return err
		}
	}
	for _, n := range names {
		if err := st.DeleteNamespace(ctx, n); err != nil {
			return err
		}
		if slices.Contains(topics, n) {
			fmt.Fprintf(a.stdout, "deleted %s\n", n)
		} else {
			fmt.Fprintf(a.stdout, "deleted the index of %s (it had no topic)\n", n)
		}
	}
	return nil
}

// indexedTopics lists the namespaces the index in --index-dir holds.
func (a *app) indexedTopics() ([]string, error) {
	g, err := loadIndex(a.indexDir(), a.log)
	if err != nil {
		return nil, err
	}
	defer func() { _ = g.Close(context.Background()) }()
	return g.Topics(), nil
}

// errNotConfirmed ends a deletion the user did not confirm.
var errNotConfirmed = errors.New("nothing was deleted")

// confirm lists what the patterns matched and asks whether to delete it:
// on the terminal, or else refuses and names --yes.
func (a *app) confirm(names []string) error {
	list := strings.Join(names, "\n  ")
	if !a.canAsk() {
		return linesError{fmt.Errorf("the patterns match %d namespace(s):\n  %s\npass --yes to delete them (%w)", len(names), list, errNotConfirmed)}
	}
	fmt.Fprintf(a.stderr, "the patterns match %d namespace(s):\n  %s\ndelete them with every entry in them? [y/N] ", len(names), list)
	answer, _ := bufio.NewReader(a.stdin).ReadString('\n')
	switch strings.ToLower(strings.TrimSpace(answer)) {
	case "y", "yes":
		return nil
	}
	return errNotConfirmed
}
