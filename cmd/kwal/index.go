package main

import "github.com/spf13/cobra"

func (a *app) indexCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "index",
		Short: "Show or verify the persisted region index",
		Long: `The region index records, per namespace, which offsets hold which region's
records, so that replaying one region fetches only its own records. kwal
checkpoints it in --index-dir (default <data-dir>/index).`,
	}
	cmd.AddCommand(a.indexShowCmd(), a.indexVerifyCmd())
	return cmd
}
