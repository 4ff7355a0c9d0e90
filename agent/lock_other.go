//go:build !unix

package agent

// LockFile is the file of a FileStore directory that a running agent holds
// a lock on (not on this platform).
const LockFile = "lock"

// Lock does nothing on platforms without flock(2).
func (s FileStore) Lock() (unlock func(), err error) { return func() {}, nil }
