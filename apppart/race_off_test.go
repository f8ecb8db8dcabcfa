//go:build !race

package apppart

const raceEnabled = false
