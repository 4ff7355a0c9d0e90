package window

import (
	"strings"
	"time"
)

// FormatDuration writes d like time.Duration.String without zero units:
// "36h", "4h30m", "90s" → "1m30s", "0s"; negative durations get a "-".
func FormatDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}
