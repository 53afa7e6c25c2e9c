package memory

import (
	"strconv"
	"strings"
	"time"
)

// Window is a span of time a question points at ("last Saturday", "two
// months ago"), judged from the question's own time.
type Window struct {
	From, To time.Time
}

// Contains reports whether t is within the window.
func (w Window) Contains(t time.Time) bool { return !t.Before(w.From) && !t.After(w.To) }

// numberWords are the counts a time expression may spell out.
var numberWords = map[string]int{
	"a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7,
	"eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12, "couple": 2,
}

var weekdays = map[string]time.Weekday{
	"sunday": time.Sunday, "monday": time.Monday, "tuesday": time.Tuesday, "wednesday": time.Wednesday,
	"thursday": time.Thursday, "friday": time.Friday, "saturday": time.Saturday,
}

// TimeWindow finds the first expression of text that names a past point in
// time relative to now and returns the span it means, with a margin that
// grows with the distance (people round: "two months ago" is about 60
// days, give or take two weeks):
//
//	yesterday                     the day before now's (±1 day)
//	last <weekday>                the latest such day before today (±1 day)
//	last week / month / year      7 / 30 / 365 days back, ± half of it
//	N days / weeks / months / years ago (N a number, "a", "an", "two",
//	  "a couple of", ...)         N units back, ± a day, 3 days, 15 days,
//	                              2 months
//
// Words such as "when", "first" or "most recently" name no span and find
// nothing: ordering questions are left to the ranking. ok is false when
// text names no span.
func TimeWindow(text string, now time.Time) (Window, bool) {
	words := strings.FieldsFunc(strings.ToLower(text), notWord)
	day := 24 * time.Hour
	at := func(back, margin time.Duration) (Window, bool) {
		c := now.Add(-back)
		return Window{From: c.Add(-margin), To: c.Add(margin)}, true
	}
	for i, w := range words {
		switch {
		case w == "yesterday":
			return at(day, day)
		case w == "last" && i+1 < len(words):
			next := words[i+1]
			if wd, ok := weekdays[next]; ok {
				back := int(now.Weekday()-wd+7) % 7
				if back == 0 {
					back = 7
				}
				return at(time.Duration(back)*day, day)
			}
			switch next {
			case "week":
				return at(7*day, 4*day)
			case "month":
				return at(30*day, 15*day)
			case "year":
				return at(365*day, 183*day)
			}
		case w == "ago" && i >= 2:
			unit := strings.TrimSuffix(words[i-1], "s")
			n, ok := count(words[:i-1])
			if !ok {
				continue
			}
			switch unit {
			case "day":
				return at(time.Duration(n)*day, day)
			case "week":
				return at(time.Duration(7*n)*day, 3*day)
			case "month":
				return at(time.Duration(30*n)*day, 15*day)
			case "year":
				return at(time.Duration(365*n)*day, 61*day)
			}
		}
	}
	return Window{}, false
}

// count reads the number that ends words: "3", "three", "a", "a couple of"
// ("couple of" ends in "of").
func count(words []string) (int, bool) {
	if len(words) == 0 {
		return 0, false
	}
	last := words[len(words)-1]
	if last == "of" && len(words) >= 2 && words[len(words)-2] == "couple" {
		return 2, true
	}
	if n, err := strconv.Atoi(last); err == nil && n > 0 && n < 10000 {
		return n, true
	}
	n, ok := numberWords[last]
	if !ok || last == "couple" {
		return 0, false
	}
	return n, true
}
