package cli

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/spf13/pflag"
)

// flagError rewrites pflag's error for a flag value that does not parse
// ("invalid argument "abc" for "-n, --number" flag: strconv.ParseInt:
// parsing "abc": invalid syntax") to name the flag, the value and what is
// expected: `--number: "abc" is not a whole number`. Other errors pass
// through unchanged.
func flagError(err error) error {
	var iv *pflag.InvalidValueError
	if !errors.As(err, &iv) {
		return err
	}
	f := iv.GetFlag()
	want := iv.Unwrap().Error()
	var num *strconv.NumError
	switch {
	case errors.As(err, &num) && errors.Is(num.Err, strconv.ErrRange):
		want = "is out of range"
	case errors.As(err, &num) && num.Func == "ParseBool":
		want = "is not true or false"
	case errors.As(err, &num) && num.Func == "ParseFloat":
		want = "is not a number"
	case errors.As(err, &num):
		want = "is not a whole number"
		if strings.HasPrefix(f.Value.Type(), "uint") {
			want = "is not a whole number ≥ 0"
		}
	case f.Value.Type() == "duration":
		want = "is not a duration (e.g. 30s, 5m, 1h30m)"
	}
	return fmt.Errorf("--%s: %q %s", f.Name, iv.GetValue(), want)
}
