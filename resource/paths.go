package resource

import (
	"strconv"
	"strings"
)

// Path helpers; see "Field paths" in the package documentation.

// joinField appends a field name to a path.
func joinField(parent, name string) string {
	if parent == "" {
		return name
	}
	return parent + "." + name
}

// joinIndex appends a list index to a path.
func joinIndex(parent string, i int) string {
	return parent + "[" + strconv.Itoa(i) + "]"
}

// joinKey appends a map key to a path.
func joinKey(parent, key string) string {
	return parent + "[" + key + "]"
}

// parentPath returns the path one step up: "a.b[2]" → "a.b", "a.b" → "a",
// "a" → "".
func parentPath(p string) string {
	if p == "" {
		return ""
	}
	if strings.HasSuffix(p, "]") {
		if i := strings.LastIndexByte(p, '['); i >= 0 {
			return p[:i]
		}
		return ""
	}
	// The last dot outside brackets.
	depth := 0
	for i := len(p) - 1; i >= 0; i-- {
		switch p[i] {
		case ']':
			depth++
		case '[':
			depth--
		case '.':
			if depth == 0 {
				return p[:i]
			}
		}
	}
	return ""
}

// suggest returns the candidate closest to word, or "" when none is close
// enough to be a likely typo. Case, '_' and '-' are ignored first (so
// "max_unavailable" finds "maxUnavailable"), then the optimal string
// alignment distance (edits and adjacent transpositions) must be at most a
// third of the word's length, and at least 1 is always allowed.
func suggest(word string, candidates []string) string {
	norm := func(s string) string {
		return strings.NewReplacer("_", "", "-", "").Replace(strings.ToLower(s))
	}
	nw := norm(word)
	for _, c := range candidates {
		if norm(c) == nw {
			return c
		}
	}
	best, bestDist := "", -1
	limit := max(1, len([]rune(word))/3)
	for _, c := range candidates {
		d := editDistance(strings.ToLower(word), strings.ToLower(c))
		if d <= limit && (bestDist < 0 || d < bestDist) {
			best, bestDist = c, d
		}
	}
	return best
}

// editDistance is the optimal string alignment distance between a and b.
func editDistance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	if len(ra) > 64 || len(rb) > 64 {
		// Long inputs are never typos of field names; avoid quadratic work.
		if a == b {
			return 0
		}
		return max(len(ra), len(rb))
	}
	d := make([][]int, len(ra)+1)
	for i := range d {
		d[i] = make([]int, len(rb)+1)
		d[i][0] = i
	}
	for j := range d[0] {
		d[0][j] = j
	}
	for i := 1; i <= len(ra); i++ {
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && ra[i-1] == rb[j-2] && ra[i-2] == rb[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(ra)][len(rb)]
}

// quoteList renders names as `"a", "b", "c"`.
func quoteList(names []string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = strconv.Quote(n)
	}
	return strings.Join(q, ", ")
}
