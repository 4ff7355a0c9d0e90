// Command sleeper is the one program of the container images TestWorker
// imports into a worker's containerd (no registry is reachable): as the
// pod sandbox ("pause") image and as the workload. It sleeps until SIGTERM
// or SIGINT and exits 0, as pause does.
package main

import (
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	fmt.Println("sleeper: running")
	s := <-sig
	fmt.Println("sleeper: exiting on", s)
}
