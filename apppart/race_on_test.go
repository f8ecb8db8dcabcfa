//go:build race

package apppart_test

// raceEnabled: the race detector slows bbolt's write transactions about
// fourteen-fold; long tests shrink their bbolt runs.
const raceEnabled = true
