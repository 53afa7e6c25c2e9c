package memory

import (
	"testing"
	"time"
)

func TestTimeWindow(t *testing.T) {
	// A Thursday afternoon.
	now := time.Date(2023, 3, 9, 15, 47, 0, 0, time.UTC)
	day := 24 * time.Hour
	cases := []struct {
		text   string
		ok     bool
		centre time.Time
		margin time.Duration
	}{
		{"I received a piece of jewelry last Saturday from whom?", true, now.Add(-5 * day), day},
		{"what did I cook last thursday", true, now.Add(-7 * day), day}, // today is Thursday: the one before
		{"What was the event I went to a week ago?", true, now.Add(-7 * day), 3 * day},
		{"I mentioned visiting a museum two months ago.", true, now.Add(-60 * day), 15 * day},
		{"the charity event 3 weeks ago", true, now.Add(-21 * day), 3 * day},
		{"a couple of days ago I fixed the sink", true, now.Add(-2 * day), day},
		{"what did we decide yesterday", true, now.Add(-day), day},
		{"since last month the build is slow", true, now.Add(-30 * day), 15 * day},
		{"a year ago I moved", true, now.Add(-365 * day), 61 * day},
		{"How many months ago did I attend the photography workshop?", false, time.Time{}, 0},
		{"Which mode of transport did I use most recently?", false, time.Time{}, 0},
		{"the last step of the migration", false, time.Time{}, 0},
		{"ago", false, time.Time{}, 0},
		{"", false, time.Time{}, 0},
	}
	for _, c := range cases {
		w, ok := TimeWindow(c.text, now)
		if ok != c.ok {
			t.Errorf("%q: ok = %v, want %v", c.text, ok, c.ok)
			continue
		}
		if !ok {
			continue
		}
		if want := (Window{From: c.centre.Add(-c.margin), To: c.centre.Add(c.margin)}); w != want {
			t.Errorf("%q: window %v .. %v, want %v .. %v", c.text, w.From, w.To, want.From, want.To)
		}
		if !w.Contains(c.centre) || w.Contains(c.centre.Add(c.margin+time.Second)) {
			t.Errorf("%q: Contains is wrong at the centre or past the margin", c.text)
		}
	}
}
