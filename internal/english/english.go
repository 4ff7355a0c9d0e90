// Package english words messages for people: singular or plural by count.
// It is a leaf (standard library only), so the hub, the agent and roostctl
// may all use it.
package english

import "strconv"

// Plural returns one when n is 1, else many: Plural(3, "member",
// "members") is "members".
func Plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// Count returns n and the word for it: Count(1, "member", "members") is
// "1 member", Count(0, …) "0 members".
func Count(n int, one, many string) string {
	return strconv.Itoa(n) + " " + Plural(n, one, many)
}
