//go:build !race

package apppart_test

const raceEnabled = false
