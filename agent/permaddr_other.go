//go:build !linux

package agent

import "errors"

// DefaultPermAddr is only implemented on Linux.
func DefaultPermAddr(name string) (string, error) {
	return "", errors.New("permanent address: not supported on this OS")
}
