package main

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/kwal/kwal/logstore/kafka"
)

func (a *app) namespacesCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:     "namespaces",
		Aliases: []string{"ns"},
		Short:   "List, create or delete namespaces (topics)",
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
		&cobra.Command{
			Use:   "create NAME...",
			Short: "Create namespaces (one partition each); existing ones are left as they are",
			Args:  cobra.MinimumNArgs(1),
			RunE: func(cmd *cobra.Command, args []string) error {
				return a.withStore(cmd.Context(), func(ctx context.Context, st *kafka.LogStore) error {
					for _, n := range args {
						if err := st.CreateNamespace(ctx, n); err != nil {
							return err
						}
						fmt.Fprintf(a.stdout, "created %s\n", n)
					}
					return nil
				})
			},
		},
		&cobra.Command{
			Use:   "delete NAME...",
			Short: "Delete namespaces with every entry in them, and their index",
			Args:  cobra.MinimumNArgs(1),
			RunE: func(cmd *cobra.Command, args []string) error {
				return a.withStore(cmd.Context(), func(ctx context.Context, st *kafka.LogStore) error {
					for _, n := range args {
						if err := st.DeleteNamespace(ctx, n); err != nil {
							return err
						}
						fmt.Fprintf(a.stdout, "deleted %s\n", n)
					}
					return nil
				})
			},
		},
	)
	return cmd
}

// withStore runs fn with an open store and closes it (and the session).
func (a *app) withStore(ctx context.Context, fn func(context.Context, *kafka.LogStore) error) error {
	s, err := a.startSession()
	if err != nil {
		return err
	}
	defer s.Close()
	st, err := s.openStore(ctx, nil)
	if err != nil {
		return err
	}
	if err := fn(ctx, st); err != nil {
		_ = st.Close()
		return err
	}
	return st.Close()
}
