package scheduler

import "crypto/rand"

// nameSuffixAlphabet is the alphabet of generated name suffixes (as
// Kubernetes' generateName: no vowels, no look-alike digits).
const nameSuffixAlphabet = "bcdfghjklmnpqrstvwxz2456789"

// MachineName returns "<pool>-<5 random characters>", the name of a new
// pool Machine.
func MachineName(pool string) string {
	b := make([]byte, 5)
	if _, err := rand.Read(b); err != nil {
		panic(err) // crypto/rand does not fail on supported platforms
	}
	for i := range b {
		b[i] = nameSuffixAlphabet[int(b[i])%len(nameSuffixAlphabet)]
	}
	return pool + "-" + string(b)
}
