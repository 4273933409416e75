package learned

import "math"

// The scale of a sketch: bucket 0 holds zeros, and bucket i ≥ 1 the
// samples v with upper(i-1) < v ≤ upper(i), where upper(i) is
// ⌊2^((i-1)/perOctave)⌋. Samples are clamped to MaxSample.
const (
	perOctave = 8
	// MaxSample is the largest sample a sketch tells apart: the largest
	// output cap a provider accepts (a 32-bit integer). A larger one
	// counts as MaxSample.
	MaxSample = math.MaxInt32
	// NumBuckets is the number of buckets of a sketch.
	NumBuckets = 2 + 31*perOctave
)

// minWeight is the weight below which a decayed bucket is dropped to
// zero, so that weights never linger as subnormal floats.
const minWeight = 1e-6

// upper returns the largest sample bucket i holds.
func upper(i int) int64 {
	if i <= 0 {
		return 0
	}
	return min(int64(math.Floor(math.Exp2(float64(i-1)/perOctave))), MaxSample)
}

// bucketOf returns the bucket that holds sample v (already clamped).
func bucketOf(v int64) int {
	if v <= 0 {
		return 0
	}
	i := 1 + int(math.Ceil(perOctave*math.Log2(float64(v))))
	// Log2 may round either way; settle on the first bucket whose upper
	// bound reaches v.
	for i < NumBuckets-1 && upper(i) < v {
		i++
	}
	for i > 1 && upper(i-1) >= v {
		i--
	}
	return min(i, NumBuckets-1)
}

// sketch is the decayed histogram of one key's samples.
type sketch struct {
	weights [NumBuckets]float32
	// total is the sum of weights.
	total float64
	// count is how many samples were ever observed (not decayed), for
	// min_samples.
	count int64
}

// observe adds sample v, decaying the older ones by keep.
func (s *sketch) observe(v int64, keep float32) {
	v = min(max(v, 0), MaxSample)
	var total float64
	for i := range s.weights {
		w := s.weights[i] * keep
		if w < minWeight {
			w = 0
		}
		s.weights[i] = w
		total += float64(w)
	}
	s.weights[bucketOf(v)]++
	s.total = total + 1
	s.count++
}

// quantile returns the upper bound of the bucket where quantile q of
// the weight falls, 0 for an empty sketch.
func (s *sketch) quantile(q float64) int64 {
	target := q * s.total
	var seen float64
	last := 0
	for i, w := range s.weights {
		if w == 0 {
			continue
		}
		seen += float64(w)
		last = i
		// A relative slack absorbs the float error of summing decayed
		// weights, which could otherwise step past the bucket that
		// holds exactly the quantile.
		if seen >= target*(1-1e-9) {
			return upper(i)
		}
	}
	return upper(last)
}
