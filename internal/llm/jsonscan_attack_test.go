package llm

import (
	"strings"
	"testing"
)

// Attacks on ValueEnd's depth limit, by which the stream readers' fast
// paths skip what they do not read: a value nested n levels, of arrays,
// objects or both, is accepted with a limit of n or more and refused
// with less, never past MaxScanDepth however deep the limit asked for,
// and at MaxScanDepth exactly when ScanObject accepts it as a member's
// value.
func TestValueEndDepthAttacks(t *testing.T) {
	for _, tc := range []struct {
		name string
		nest func(n int) string
	}{
		{"arrays", func(n int) string { return strings.Repeat("[", n) + strings.Repeat("]", n) }},
		{"objects", func(n int) string { return strings.Repeat(`{"a":`, n-1) + "{}" + strings.Repeat("}", n-1) }},
		{"both", mixedNest},
	} {
		for _, n := range []int{1, 2, 62, 63, 64, 65, 66, 200} {
			v := []byte(tc.nest(n))
			for _, limit := range []int{0, 1, n - 1, n, n + 1, MaxScanDepth, MaxScanDepth + 1, 1 << 20} {
				end, ok := ValueEnd(v, 0, limit)
				want := n <= min(limit, MaxScanDepth)
				if ok != want || (ok && end != len(v)) {
					t.Errorf("%s nested %d deep, limit %d: got end %d of %d, %v; want %v", tc.name, n, limit, end, len(v), ok, want)
				}
			}
			_, got := ValueEnd(v, 0, MaxScanDepth)
			if want := WellFormedObject([]byte(`{"k":` + string(v) + `}`)); got != want {
				t.Errorf("%s nested %d deep: ValueEnd got %v, ScanObject %v", tc.name, n, got, want)
			}
		}
	}
}

// mixedNest is a value nested n levels deep, arrays and objects
// alternating, each with a member before the next level.
func mixedNest(n int) string {
	var b strings.Builder
	for i := range n {
		if i%2 == 0 {
			b.WriteString(`[1,`)
		} else {
			b.WriteString(`{"a":1,"b":`)
		}
	}
	b.WriteString("true")
	for i := n - 1; i >= 0; i-- {
		if i%2 == 0 {
			b.WriteString(`]`)
		} else {
			b.WriteString(`}`)
		}
	}
	return b.String()
}
