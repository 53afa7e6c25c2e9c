package memory

import (
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// DatedText returns text with the date each relative time expression in
// it means, seen from at (when the memory was written), in parentheses
// after the expression: "I adopted her last Saturday (2023-05-20)".
// Read weeks later, "last Saturday" no longer says when; a question
// "when did she adopt the dog?" needs the date. The date is as precise as
// the words: a day ("2023-05-20": yesterday, tomorrow, last or next
// <weekday>, N days ago), about a day ("~2023-05-14": last or next week,
// last weekend, N weeks ago), a month ("~2023-04": last or next month, N
// months ago) or a year ("2022": last or next year, N years ago). Words
// that name the day it was written ("today", "tonight") and vague ones
// ("recently", "a few days ago", "the other day") are left alone, as is
// every text when at is zero.
func DatedText(text string, at time.Time) string {
	if at.IsZero() || text == "" {
		return text
	}
	ws := wordSpans(text)
	if len(ws) == 0 {
		return text
	}
	var sb strings.Builder
	done := 0 // bytes of text written
	for i := 0; i < len(ws); i++ {
		date, last := relativeDate(ws, i, at)
		if date == "" {
			continue
		}
		end := ws[last].end
		sb.WriteString(text[done:end])
		sb.WriteString(" (" + date + ")")
		done = end
		i = last
	}
	if done == 0 {
		return text
	}
	sb.WriteString(text[done:])
	return sb.String()
}

type wordSpan struct {
	w          string // lower-cased
	start, end int    // bytes of text
}

// spans are the words of text (runs of letters and digits), lower-cased,
// with where they are.
func wordSpans(text string) []wordSpan {
	var out []wordSpan
	start := -1
	for i, r := range text {
		word := unicode.IsLetter(r) || unicode.IsDigit(r)
		if word && start < 0 {
			start = i
		}
		if !word && start >= 0 {
			out = append(out, wordSpan{strings.ToLower(text[start:i]), start, i})
			start = -1
		}
	}
	if start >= 0 {
		out = append(out, wordSpan{strings.ToLower(text[start:]), start, len(text)})
	}
	return out
}

// relativeDate reads the time expression that starts at word i of ws: the
// date it means from at, formatted as DatedText says, and the index of
// its last word ("" when none starts there).
func relativeDate(ws []wordSpan, i int, at time.Time) (string, int) {
	dayOf := func(t time.Time) string { return t.Format("2006-01-02") }
	about := func(t time.Time) string { return "~" + t.Format("2006-01-02") }
	month := func(t time.Time) string { return "~" + t.Format("2006-01") }
	year := func(t time.Time) string { return t.Format("2006") }
	w := ws[i].w
	switch w {
	case "yesterday":
		return dayOf(at.AddDate(0, 0, -1)), i
	case "tomorrow":
		return dayOf(at.AddDate(0, 0, 1)), i
	case "last", "next":
		if i+1 >= len(ws) {
			return "", i
		}
		dir := -1
		if w == "next" {
			dir = 1
		}
		switch n := ws[i+1].w; n {
		case "week":
			return about(at.AddDate(0, 0, 7*dir)), i + 1
		case "weekend":
			if dir > 0 {
				return about(weekdayFrom(at, time.Saturday, 1)), i + 1
			}
			return about(weekdayFrom(at, time.Saturday, -1)), i + 1
		case "month":
			return month(at.AddDate(0, dir, 0)), i + 1
		case "year":
			return year(at.AddDate(dir, 0, 0)), i + 1
		default:
			if wd, ok := weekdays[n]; ok {
				return dayOf(weekdayFrom(at, wd, dir)), i + 1
			}
		}
	}
	// N days / weeks / months / years ago: the count starts here.
	for j := i + 1; j+1 < len(ws) && j <= i+3; j++ {
		if ws[j+1].w != "ago" {
			continue
		}
		n, ok := count(words(ws[i:j]))
		if !ok || !countStarts(ws[i].w) {
			return "", i
		}
		switch strings.TrimSuffix(ws[j].w, "s") {
		case "day":
			return dayOf(at.AddDate(0, 0, -n)), j + 1
		case "week":
			return about(at.AddDate(0, 0, -7*n)), j + 1
		case "month":
			return month(at.AddDate(0, -n, 0)), j + 1
		case "year":
			return year(at.AddDate(-n, 0, 0)), j + 1
		}
		return "", i
	}
	return "", i
}

// countStarts reports whether w can begin a count ("a couple of", "two",
// "3"), so that the expression is read from its first word.
func countStarts(w string) bool {
	if _, ok := numberWords[w]; ok {
		return true
	}
	if w == "" || utf8.RuneCountInString(w) > 4 {
		return false
	}
	for _, r := range w {
		if r < '0' || r > '9' {
			return false
		}
	}
	return true
}

func words(ws []wordSpan) []string {
	out := make([]string, len(ws))
	for i, s := range ws {
		out[i] = s.w
	}
	return out
}

// weekdayFrom is the nearest day of weekday wd strictly before (dir -1)
// or after (dir 1) at's day.
func weekdayFrom(at time.Time, wd time.Weekday, dir int) time.Time {
	for d := 1; d <= 7; d++ {
		t := at.AddDate(0, 0, dir*d)
		if t.Weekday() == wd {
			return t
		}
	}
	return at
}
