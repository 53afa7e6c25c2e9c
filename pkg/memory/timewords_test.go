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

func TestTimeWindowCalendarDates(t *testing.T) {
	now := time.Date(2023, 3, 9, 15, 47, 0, 0, time.UTC) // a Thursday
	day := 24 * time.Hour
	date := func(y int, m time.Month, d int) time.Time { return time.Date(y, m, d, 0, 0, 0, 0, time.UTC) }
	cases := []struct {
		text     string
		ok       bool
		from, to time.Time
	}{
		// A day: the day itself and a day either side.
		{"Which city was Calvin at on October 3, 2023?", true, date(2023, 10, 2), date(2023, 10, 5)},
		{"What is Audrey's favorite recipe that she shares with Andrew on 3 July, 2023?", true, date(2023, 7, 2), date(2023, 7, 5)},
		{"Where did Dave come back from on 1st September 2023?", true, date(2023, 8, 31), date(2023, 9, 3)},
		{"the weekend before 4th October, 2023", true, date(2023, 10, 3), date(2023, 10, 6)},
		// A month: three days either side.
		{"What did Dave open in May 2023?", true, date(2023, 5, 1).Add(-3 * day), date(2023, 6, 1).Add(3 * day)},
		{"Where was Calvin located in the last week of October 2023?", true, date(2023, 10, 1).Add(-3 * day), date(2023, 11, 1).Add(3 * day)},
		// No year: the latest one before now.
		{"Who headlined the festival in October?", true, date(2022, 10, 1).Add(-3 * day), date(2022, 11, 1).Add(3 * day)},
		{"what did I buy on February 2", true, date(2023, 2, 1), date(2023, 2, 4)},
		{"what happened on 20 March", true, date(2022, 3, 19), date(2022, 3, 22)},
		// A year: 15 days either side.
		{"Which cities did Dave travel to in 2022?", true, date(2022, 1, 1).Add(-15 * day), date(2023, 1, 1).Add(15 * day)},
		// Month names that are also words need a number beside them.
		{"May I ask what you did?", false, time.Time{}, time.Time{}},
		{"the protesters march on", false, time.Time{}, time.Time{}},
		{"in may we trust", false, time.Time{}, time.Time{}},
		{"a year without a date: 2023", false, time.Time{}, time.Time{}},
	}
	for _, c := range cases {
		w, ok := TimeWindow(c.text, now)
		if ok != c.ok {
			t.Errorf("%q: ok = %v, want %v", c.text, ok, c.ok)
			continue
		}
		if ok && (!w.From.Equal(c.from) || !w.To.Equal(c.to)) {
			t.Errorf("%q: window %v .. %v, want %v .. %v", c.text, w.From, w.To, c.from, c.to)
		}
	}
}
