//go:build race

package road_test

// raceEnabled says the tests run with -race.
const raceEnabled = true
