//go:build unix

package sim

import "syscall"

// raiseOpenFiles raises this process's limit of open files (RLIMIT_NOFILE)
// to at least want: the soft limit up to the hard one, and the hard one
// too where the process may (root, up to the kernel's fs.nr_open). It
// returns the soft limit in force afterwards; an error only when the
// limit cannot be read.
func raiseOpenFiles(want uint64) (uint64, error) {
	var l syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &l); err != nil {
		return 0, err
	}
	if l.Cur >= want {
		return l.Cur, nil
	}
	if l.Max < want {
		raised := syscall.Rlimit{Cur: want, Max: want}
		if syscall.Setrlimit(syscall.RLIMIT_NOFILE, &raised) == nil {
			return want, nil
		}
	}
	l.Cur = min(want, l.Max)
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &l); err != nil {
		_ = syscall.Getrlimit(syscall.RLIMIT_NOFILE, &l)
	}
	return l.Cur, nil
}
