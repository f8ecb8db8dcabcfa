// Package stats holds the summary statistics the project's benchmark
// programs report, so that each is computed one way.
package stats

import "slices"

// Number is what Median takes: integers (time.Duration among them) and
// floats.
type Number interface {
	~int | ~int64 | ~uint64 | ~float64
}

// Median returns the median of xs (the mean of the two middle values when
// len(xs) is even; for integers, rounded toward zero), or 0 for no values.
// xs is not modified.
func Median[T Number](xs []T) T {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	a, b := s[n/2-1], s[n/2]
	return a + (b-a)/2
}
