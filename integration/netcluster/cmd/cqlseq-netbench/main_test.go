package main

import (
	"testing"
	"time"
)

func TestParseProfiles(t *testing.T) {
	got, err := parseProfiles("0;0.5ms;0,500us,5ms", 3)
	if err != nil {
		t.Fatal(err)
	}
	ms := time.Millisecond
	want := [][]time.Duration{{0, 0, 0}, {ms / 2, ms / 2, ms / 2}, {0, ms / 2, 5 * ms}}
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for i := range want {
		for j := range want[i] {
			if got[i][j] != want[i][j] {
				t.Fatalf("got %v, want %v", got, want)
			}
		}
	}
	for _, bad := range []string{"1ms,2ms", "x", "-1ms"} {
		if _, err := parseProfiles(bad, 3); err == nil {
			t.Errorf("parseProfiles(%q): no error", bad)
		}
	}
}
