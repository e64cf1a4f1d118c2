//go:build linux

package main

import (
	"math"
	"slices"
)

// summary describes a set of samples.
type summary struct {
	Median float64 `json:"median"`
	Min    float64 `json:"min"`
	P90    float64 `json:"p90"` // nearest rank: the ceil(0.9n)-th smallest
	Max    float64 `json:"max"`
}

// summarize returns the summary of xs, which must not be empty. The median
// of an even number of samples is the mean of the middle two.
func summarize(xs []float64) summary {
	s := slices.Sorted(slices.Values(xs))
	n := len(s)
	median := s[n/2]
	if n%2 == 0 {
		median = (s[n/2-1] + s[n/2]) / 2
	}
	return summary{
		Median: median,
		Min:    s[0],
		P90:    s[int(math.Ceil(0.9*float64(n)))-1],
		Max:    s[n-1],
	}
}
