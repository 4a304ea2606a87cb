package main

import (
	"context"
	"fmt"
	"slices"

	"github.com/spf13/cobra"

	"github.com/kwal/kwal/logstore/kafka"
)

func (a *app) namespacesCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:     "namespaces",
		Aliases: []string{"ns"},
		Short:   "List, create, prune or delete namespaces (topics)",
		Long: `A namespace is where regions' logs live: for kwal on Kafka, a topic with one
partition. Many regions share one namespace.`,
	}
	cmd.AddCommand(
		&cobra.Command{
			Use:   "list",
			Short: "List the namespaces (non-internal topics), one per line",
			Args:  cobra.NoArgs,
			RunE: func(cmd *cobra.Command, _ []string) error {
				return a.withStore(cmd.Context(), func(ctx context.Context, st *kafka.LogStore) error {
					names, err := st.ListNamespaces(ctx)
					if err != nil {
						return err
					}
					for _, n := range names {
						fmt.Fprintln(a.stdout, n)
					}
					return nil
				})
			},
		},
		a.namespacesCreateCmd(),
		&cobra.Command{
			Use:   "prune NAME...",
			Short: "Delete the records no region needs any more, as the persisted index proves",
			Long: `prune loads the index in --index-dir (read-only: it may belong to a running
datanode) and deletes each namespace's records below the lowest entry any
region still holds: every region with records there must have declared them
obsolete. Records the index has not accounted for are never deleted.`,
			Args: cobra.MinimumNArgs(1),
			RunE: func(cmd *cobra.Command, args []string) error {
				return a.withStoreConfig(cmd.Context(), func(c *kafka.Config) {
					c.IndexReadOnly = true
				}, func(ctx context.Context, st *kafka.LogStore) error {
					for _, n := range args {
						first, err := st.Prune(ctx, n)
						if err != nil {
							return err
						}
						fmt.Fprintf(a.stdout, "%s: the first entry ID available is %d\n", n, first)
					}
					return nil
				})
			},
		},
		a.namespacesDeleteCmd(),
	)
	return cmd
}

func (a *app) namespacesCreateCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "create NAME...",
		Short: "Create namespaces (one partition each); existing ones are left as they are, and said so",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.withStore(cmd.Context(), func(ctx context.Context, st *kafka.LogStore) error {
				names, err := st.ListNamespaces(ctx)
				if err != nil {
					return err
				}
				for _, n := range args {
					if slices.Contains(names, n) {
						fmt.Fprintf(a.stdout, "exists %s (left as it is)\n", n)
						continue
					}
					if err := st.CreateNamespace(ctx, n); err != nil {
						return err
					}
					fmt.Fprintf(a.stdout, "created %s\n", n)
				}
				return nil
			})
		},
	}
}

// withStore runs fn with an open store and closes it (and the session).
func (a *app) withStore(ctx context.Context, fn func(context.Context, *kafka.LogStore) error) error {
	return a.withStoreConfig(ctx, nil, fn)
}

// withStoreConfig is withStore with a change to the store's config.
func (a *app) withStoreConfig(ctx context.Context, mutate func(*kafka.Config), fn func(context.Context, *kafka.LogStore) error) error {
	s, err := a.startSession()
	if err != nil {
		return err
	}
	defer s.Close()
	st, err := s.openStore(ctx, mutate)
	if err != nil {
		return err
	}
	if err := fn(ctx, st); err != nil {
		_ = st.Close()
		return err
	}
	return st.Close()
}
