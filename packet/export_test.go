package packet

// RaceEnabled lets the external tests skip allocation counts under -race.
var RaceEnabled = raceEnabled
