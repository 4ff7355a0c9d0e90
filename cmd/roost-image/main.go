// Command roost-image bakes Roost enrollment images (hybrid ISO or raw GPT
// disk), inspects them, builds signed release bundles and makes signing
// keys. See `roost-image --help`. It exits 0 on success, 1 on failure and
// 2 on bad usage (as roostctl).
package main

import "os"

func main() {
	os.Exit(execute(os.Args[1:], os.Stdout, os.Stderr))
}
