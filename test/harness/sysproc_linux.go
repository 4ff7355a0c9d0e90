package harness

import "syscall"

// sysProcAttr makes a child process die with the test binary (Linux
// parent-death signal), so a test binary killed by -timeout leaves no hub behind.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
