package stats

import (
	"testing"
	"time"
)

func TestMedian(t *testing.T) {
	if got := Median([]float64{3, 1, 2}); got != 2 {
		t.Errorf("odd: got %v, want 2", got)
	}
	if got := Median([]float64{4, 1, 3, 2}); got != 2.5 {
		t.Errorf("even: got %v, want 2.5", got)
	}
	if got := Median([]time.Duration{3 * time.Second, time.Second}); got != 2*time.Second {
		t.Errorf("durations: got %v, want 2s", got)
	}
	if got := Median([]int64{-4, 2}); got != -1 {
		t.Errorf("negative integers: got %v, want -1", got)
	}
	if got := Median[float64](nil); got != 0 {
		t.Errorf("empty: got %v, want 0", got)
	}
	xs := []float64{3, 1, 2}
	Median(xs)
	if xs[0] != 3 || xs[1] != 1 {
		t.Errorf("xs modified: %v", xs)
	}
}
