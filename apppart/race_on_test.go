//go:build race

package apppart

// raceEnabled: the race detector slows bbolt's write transactions about
// fourteen-fold; long tests shrink their bbolt runs.
const raceEnabled = true
