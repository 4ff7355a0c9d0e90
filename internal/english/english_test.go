package english

import "testing"

func TestPluralAndCount(t *testing.T) {
	for _, c := range []struct {
		n           int
		word, count string
	}{
		{0, "members", "0 members"},
		{1, "member", "1 member"},
		{2, "members", "2 members"},
		{-1, "members", "-1 members"},
	} {
		if got := Plural(c.n, "member", "members"); got != c.word {
			t.Errorf("Plural(%d) = %q, want %q", c.n, got, c.word)
		}
		if got := Count(c.n, "member", "members"); got != c.count {
			t.Errorf("Count(%d) = %q, want %q", c.n, got, c.count)
		}
	}
}
