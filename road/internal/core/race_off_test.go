//go:build !race

package core

// raceEnabled says the tests run with -race.
const raceEnabled = false
