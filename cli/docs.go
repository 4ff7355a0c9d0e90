package cli

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"
	"github.com/spf13/cobra/doc"
)

func newDocsCommand(o *options) *cobra.Command {
	return &cobra.Command{
		Use:   "docs DIR",
		Short: "Write the Markdown command reference to DIR",
		Long: `Write one Markdown file per command (roostctl.md, roostctl_apply.md, …) to
DIR, creating it when missing. 'make generate' uses it to produce docs/cli/.
The output depends only on the code, so it can be checked in and compared.`,
		Example: `  roostctl docs docs/cli`,
		Hidden:  true,
		Args:    exactArgs(1, "the output directory DIR"),
		RunE: func(cmd *cobra.Command, args []string) error {
			dir := args[0]
			if err := os.MkdirAll(dir, 0o755); err != nil {
				return err
			}
			if err := doc.GenMarkdownTree(cmd.Root(), dir); err != nil {
				return err
			}
			o.debugf("wrote the command reference to %s", dir)
			fmt.Fprintf(o.Out, "wrote the command reference to %s\n", dir)
			return nil
		},
	}
}
