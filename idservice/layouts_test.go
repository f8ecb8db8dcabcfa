package idservice_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cqlseq/cqlseq/idservice"
	"github.com/cqlseq/cqlseq/timeshard"
)

// TestParseLayout: --layout NAME=SPEC's presets and items, and every
// problem of a bad one reported up front.
func TestParseLayout(t *testing.T) {
	now := time.Date(2026, 11, 29, 9, 0, 0, 0, time.UTC)
	def := idservice.DefaultLayouts()
	withEpoch := def["63"]
	withEpoch.Layout.Epoch = time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC)
	leafNoRandom := idservice.LeafPreset()
	leafNoRandom.RandomStart = 0
	split := def["63"]
	split.Layout.TimeBits, split.Layout.NodeBits, split.Layout.CounterBits = 42, 8, 13
	for _, c := range []struct {
		name, spec string
		want       idservice.LayoutOptions
	}{
		{"63", "leaf", idservice.LeafPreset()},
		{"63", "cqlseq", def["63"]},
		{"53", "cqlseq", def["53"]},
		{"63", "epoch=2020-01-01T00:00:00Z", withEpoch},
		{"63", "epoch=1577836800000", withEpoch},
		{"63", "leaf, random-start=0", leafNoRandom},
		{"63", "epoch=1288834974657,random-start=100", idservice.LeafPreset()},
		{"63", "bits=42/8/13", split},
	} {
		got, err := idservice.ParseLayout(c.name, c.spec, now)
		if assert.NoError(t, err, "%s=%s", c.name, c.spec) {
			assert.Equal(t, c.want, got, "%s=%s", c.name, c.spec)
		}
	}
	for _, c := range []struct {
		name, spec string
		werrs      []string
	}{
		{"64", "leaf", []string{`layout "64": want 63 or 53`}},
		{"63", "", []string{"empty"}},
		{"63", "snowflake", []string{`"snowflake": want a preset`}},
		{"63", "epoch=2030-01-01T00:00:00Z", []string{"epoch 2030-01-01T00:00:00Z is in the future"}},
		{"63", "epoch=yesterday,bits=41/10", []string{`epoch "yesterday"`, `bits "41/10"`}},
		{"63", "bits=41/10/10", []string{"= 61, want 63"}},
		{"53", "leaf", []string{"IDs of 63 bits", "want 53"}},
		{"53", "random-start=129", []string{"random start 129: want at most 128"}},
		{"63", "random-start=-1,size=3", []string{`random-start "-1"`, `unknown item "size"`}},
		{"63", "epoch=2020-01-01T00:00:00Z,bits=32/10/21", []string{"ran out at 2020-02-19"}},
	} {
		_, err := idservice.ParseLayout(c.name, c.spec, now)
		require.Error(t, err, "%s=%s", c.name, c.spec)
		assert.ErrorIs(t, err, idservice.ErrInvalidOptions, "%s=%s", c.name, c.spec)
		for _, w := range c.werrs {
			assert.ErrorContains(t, err, w, "%s=%s", c.name, c.spec)
		}
	}
}

// TestOptionsLayoutsValidate: New refuses bad Layouts up front, every
// problem at once, before any store call.
func TestOptionsLayoutsValidate(t *testing.T) {
	o := testOptions(nil)
	future := idservice.DefaultLayouts()["53"]
	future.Layout.Epoch = time.Now().Add(time.Hour)
	wide := idservice.LeafPreset()
	wide.Layout.CounterBits = 13
	o.Layouts = map[string]idservice.LayoutOptions{"53": future, "63": wide, "52": idservice.LeafPreset()}
	_, err := idservice.New(context.Background(), o)
	require.ErrorIs(t, err, idservice.ErrInvalidOptions)
	for _, w := range []string{`layout "52": want 63 or 53`, "layout 53: epoch", "is in the future", "layout 63: ", "= 64, want 63"} {
		assert.ErrorContains(t, err, w)
	}
	assert.True(t, errors.Is(err, timeshard.ErrInvalidLayout), "the split's error is timeshard's")
}
