package events

import "time"

// SetAPIAttempt sets the lag reads' attempt timeout (apiAttempt) and
// returns the function that restores it.
func SetAPIAttempt(d time.Duration) func() {
	old := apiAttempt
	apiAttempt = d
	return func() { apiAttempt = old }
}
