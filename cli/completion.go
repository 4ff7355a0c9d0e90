package cli

import (
	"github.com/spf13/cobra"
)

func newCompletionCommand(o *options) *cobra.Command {
	return &cobra.Command{
		Use:   "completion bash|zsh|fish|powershell",
		Short: "Print a shell completion script",
		Long: `Print a script that makes your shell complete roostctl's commands, flags,
kinds and output formats when you press Tab, and the names of objects
(pools, servers, machines, tokens, windows, releases, hub members, …),
which roostctl asks the hub for: from the member it reaches (which may lag
the leader), waiting at most 2s. Without a configuration, or when the hub
does not answer in time, nothing is offered.

bash needs the bash-completion package (version 2). zsh needs compinit
enabled (autoload -U compinit; compinit) before the script is loaded.`,
		Example: `  # bash, this shell only
  source <(roostctl completion bash)

  # bash, every new shell (Linux)
  roostctl completion bash > /etc/bash_completion.d/roostctl

  # zsh, every new shell
  roostctl completion zsh > "${fpath[1]}/_roostctl"

  # fish
  roostctl completion fish > ~/.config/fish/completions/roostctl.fish

  # PowerShell, this session
  roostctl completion powershell | Out-String | Invoke-Expression`,
		ValidArgs:             []string{"bash", "zsh", "fish", "powershell"},
		Args:                  cobra.MatchAll(exactArgs(1, "a shell: bash, zsh, fish or powershell"), cobra.OnlyValidArgs),
		DisableFlagsInUseLine: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			root := cmd.Root()
			switch args[0] {
			case "bash":
				return root.GenBashCompletionV2(o.Out, true)
			case "zsh":
				return root.GenZshCompletion(o.Out)
			case "fish":
				return root.GenFishCompletion(o.Out, true)
			default:
				return root.GenPowerShellCompletionWithDesc(o.Out)
			}
		},
	}
}
