package memory

import (
	"testing"
	"time"
)

func TestDatedText(t *testing.T) {
	at := time.Date(2023, 5, 25, 13, 14, 0, 0, time.UTC) // a Thursday
	for in, want := range map[string]string{
		"I opened my car shop last week!":                                              "I opened my car shop last week (~2023-05-18)!",
		"We adopted her last Saturday, she is lovely.":                                 "We adopted her last Saturday (2023-05-20), she is lovely.",
		"Yesterday I met some artists in Boston.":                                      "Yesterday (2023-05-24) I met some artists in Boston.",
		"I had a car accident two weeks ago and a fender bender a couple of days ago.": "I had a car accident two weeks ago (~2023-05-11) and a fender bender a couple of days ago (2023-05-23).",
		"Planning a trip there next month. See you next Friday":                        "Planning a trip there next month (~2023-06). See you next Friday (2023-05-26)",
		"We moved 3 years ago, last year we painted":                                   "We moved 3 years ago (2020), last year (2022) we painted",
		"Today was great, a few days ago too, and recently":                            "Today was great, a few days ago too, and recently",
		"the last step; next, the end":                                                 "the last step; next, the end",
		"tomorrow":                                                                     "tomorrow (2023-05-26)",
		"last weekend was fun":                                                         "last weekend (~2023-05-20) was fun",
		"":                                                                             "",
	} {
		if got := DatedText(in, at); got != want {
			t.Errorf("DatedText(%q)\n = %q\nwant %q", in, got, want)
		}
	}
	if got := DatedText("last week", time.Time{}); got != "last week" {
		t.Errorf("without a time: %q", got)
	}
}
