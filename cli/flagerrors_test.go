package cli

import (
	"testing"
	"time"

	"github.com/spf13/pflag"
)

// A flag value that does not parse is reported with the flag's long name,
// the value and what is expected.
func TestFlagError(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"-n", "abc"}, `--number: "abc" is not a whole number`},
		{[]string{"--number", "99999999999999999999"}, `--number: "99999999999999999999" is out of range`},
		{[]string{"--uses", "-1"}, `--uses: "-1" is not a whole number ≥ 0`},
		{[]string{"--ttl", "5x"}, `--ttl: "5x" is not a duration (e.g. 30s, 5m, 1h30m)`},
		{[]string{"--watch=maybe"}, `--watch: "maybe" is not true or false`},
		{[]string{"--ratio", "x"}, `--ratio: "x" is not a number`},
		{[]string{"--nope"}, `unknown flag: --nope`},
	} {
		fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
		fs.IntP("number", "n", 1, "")
		fs.Uint32("uses", 0, "")
		fs.Duration("ttl", time.Hour, "")
		fs.Bool("watch", false, "")
		fs.Float64("ratio", 1, "")
		fs.SetOutput(nopWriter{})
		err := fs.Parse(c.args)
		if err == nil {
			t.Fatalf("%v: no error", c.args)
		}
		if got := flagError(err).Error(); got != c.want {
			t.Errorf("%v: %q, want %q", c.args, got, c.want)
		}
	}
}

type nopWriter struct{}

func (nopWriter) Write(p []byte) (int, error) { return len(p), nil }
