package cli

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestFormat(t *testing.T) {
	for n, want := range map[uint64]string{0: "0", 999: "999", 1000: "1,000", 1234567: "1,234,567"} {
		assert.Equal(t, want, commas(n))
	}
	assert.Equal(t, "1 event", plural(1, "event", "events"))
	assert.Equal(t, "2,000 events", plural(2000, "event", "events"))
}
