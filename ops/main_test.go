package ops

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain checks that no test leaves a goroutine behind (the lag run's
// partition, load and store among them).
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
