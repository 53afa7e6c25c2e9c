//go:build race

package vecindex

// raceEnabled shrinks the large recall tests under the race detector, which
// makes them about ten times slower.
const raceEnabled = true
