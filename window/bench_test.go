package window

import (
	"testing"
	"time"
)

func BenchmarkParse(b *testing.B) {
	for b.Loop() {
		if _, err := Parse(specOf("FREQ=WEEKLY;BYDAY=TU;BYHOUR=2;BYMINUTE=0", 4*time.Hour, "Europe/Berlin")); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkNext(b *testing.B) {
	w := mustParse(b, "FREQ=WEEKLY;BYDAY=TU;BYHOUR=2;BYMINUTE=0", 4*time.Hour, "Europe/Berlin")
	from := time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)
	for b.Loop() {
		if len(w.Next(from, 5)) != 5 {
			b.Fatal("not 5")
		}
	}
}

func BenchmarkOpenAtHourly(b *testing.B) {
	w := mustParse(b, "FREQ=HOURLY;INTERVAL=3;BYMINUTE=15", 2*time.Hour, "America/New_York")
	t := time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)
	for b.Loop() {
		w.OpenAt(t)
	}
}

func BenchmarkNextAny(b *testing.B) {
	ws := []*Window{
		mustParse(b, "FREQ=DAILY;BYHOUR=2;BYMINUTE=30", 4*time.Hour, "Europe/Berlin"),
		mustParse(b, "FREQ=WEEKLY;BYDAY=SA;BYHOUR=22", 6*time.Hour, "Europe/Berlin"),
		mustParse(b, "FREQ=MONTHLY;BYDAY=2TU;BYHOUR=12", time.Hour, "America/New_York"),
	}
	from := time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)
	for b.Loop() {
		NextAny(ws, from, 10)
	}
}
