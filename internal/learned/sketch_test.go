package learned

import (
	"math"
	"testing"
)

// TestBuckets: every sample lands in the first bucket whose upper bound
// reaches it, and the bounds grow by at most 2^(1/8) from 8 on.
func TestBuckets(t *testing.T) {
	for _, v := range []int64{0, 1, 2, 3, 7, 8, 9, 100, 255, 256, 257, 1000, 4095, 4096, 4097, 1 << 20, MaxSample - 1, MaxSample} {
		i := bucketOf(v)
		if upper(i) < v {
			t.Errorf("bucketOf(%d) = %d, whose upper bound %d is below it", v, i, upper(i))
		}
		if i > 0 && upper(i-1) >= v {
			t.Errorf("bucketOf(%d) = %d, but bucket %d (upper %d) holds it already", v, i, i-1, upper(i-1))
		}
	}
	if got := bucketOf(MaxSample); got != NumBuckets-1 {
		t.Errorf("bucketOf(MaxSample): got %d, want the last bucket %d", got, NumBuckets-1)
	}
	for i := 1; i < NumBuckets; i++ {
		lo, hi := upper(i-1), upper(i)
		if hi < lo {
			t.Fatalf("upper(%d) = %d < upper(%d) = %d", i, hi, i-1, lo)
		}
		// Each bound is 2^(1/8) times the last, rounded down.
		if float64(hi) > float64(lo+1)*math.Exp2(1.0/perOctave) {
			t.Errorf("bucket %d spans %d..%d: wider than 2^(1/8)", i, lo, hi)
		}
	}
}

func TestSketchQuantile(t *testing.T) {
	type run struct {
		v int64
		n int
	}
	tests := []struct {
		name   string
		decay  int64
		feed   []run
		q      float64
		lo, hi int64 // the quantile's bounds
	}{
		{"empty", 1000, nil, 0.95, 0, 0},
		{"one value", 1000, []run{{100, 100}}, 0.95, 100, 109},
		{"zeros", 1000, []run{{0, 100}}, 0.95, 0, 0},
		{"negative counts as zero", 1000, []run{{-5, 10}}, 0.5, 0, 0},
		// The tail comes first, so that the decay leaves it a little
		// under its share.
		{"p95 of a tail of 5%", 1000, []run{{1000, 5}, {10, 95}}, 0.95, 10, 10},
		{"p95 of a tail of 8%", 1000, []run{{1000, 8}, {10, 92}}, 0.95, 1000, 1090},
		{"p99 sees the tail", 1000, []run{{1000, 5}, {10, 95}}, 0.99, 1000, 1090},
		{"p50", 1000, []run{{10, 40}, {200, 60}}, 0.5, 200, 218},
		{"past the largest sample", 1000, []run{{1 << 40, 3}}, 0.5, MaxSample, MaxSample},
		// Decay: after 3000 short samples on a memory of 500, the old
		// long ones weigh (1-1/500)^3000 ≈ 0.25% of their own.
		{"decay forgets", 500, []run{{1000, 1000}, {10, 3000}}, 0.95, 10, 10},
		// Without decay worth the name, they still count.
		{"a long memory remembers", 1_000_000, []run{{1000, 1000}, {10, 3000}}, 0.95, 1000, 1090},
		// The most recent samples weigh most: 100 long samples after
		// 900 short ones, on a memory of 100, are most of the weight.
		{"recent samples weigh most", 100, []run{{10, 900}, {1000, 100}}, 0.5, 1000, 1090},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var s sketch
			keep := float32(1 - 1/float64(tt.decay))
			for _, r := range tt.feed {
				for range r.n {
					s.observe(r.v, keep)
				}
			}
			if got := s.quantile(tt.q); got < tt.lo || got > tt.hi {
				t.Errorf("quantile %v: got %d, want %d..%d", tt.q, got, tt.lo, tt.hi)
			}
		})
	}
}

// TestSketchWeightIsBounded: however many samples, the total weight
// converges to the memory, and no weight is subnormal.
func TestSketchWeightIsBounded(t *testing.T) {
	var s sketch
	keep := float32(1 - 1.0/200)
	for i := range 100_000 {
		s.observe(int64(i%5000), keep)
	}
	if s.total > 201 || s.total < 150 {
		t.Errorf("total weight after 100000 samples on a memory of 200: got %v, want about 200", s.total)
	}
	for i, w := range s.weights {
		if w != 0 && w < minWeight {
			t.Errorf("bucket %d holds %v, below minWeight", i, w)
		}
	}
	if s.count != 100_000 {
		t.Errorf("count: got %d, want 100000", s.count)
	}
}
