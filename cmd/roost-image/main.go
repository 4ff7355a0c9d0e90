// Command roost-image bakes Roost enrollment images (hybrid ISO or raw GPT
// disk), inspects them, builds signed release bundles and makes signing
// keys. See `roost-image --help`.
package main

import (
	"fmt"
	"os"
)

func main() {
	cmd := newRootCmd(os.Stdout, os.Stderr)
	if err := cmd.Execute(); err != nil {
		fmt.Fprintf(os.Stderr, "roost-image: %v\n", err)
		os.Exit(1)
	}
}
