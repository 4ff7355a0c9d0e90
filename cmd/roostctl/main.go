// Command roostctl is the command-line client of the Roost hub; see
// package cli (or `roostctl --help`) for its commands and exit codes.
package main

import (
	"os"

	"github.com/roostfleet/roost/cli"
)

func main() {
	os.Exit(cli.Execute())
}
