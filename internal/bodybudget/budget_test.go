package bodybudget

import (
	"sync"
	"testing"
)

func TestBudgetCharges(t *testing.T) {
	type step struct {
		op        string // charge, resize, release
		principal string
		from, n   int64 // resize: from → n
		want      Outcome
		used      int64 // after the step
	}
	for _, tc := range []struct {
		name         string
		total, share int64
		steps        []step
	}{
		{"a principal up to its share, then refused; another still fits", 100, 40, []step{
			{"charge", "a", 0, 30, Admitted, 30},
			{"charge", "a", 0, 10, Admitted, 40},
			{"charge", "a", 0, 1, OverShare, 40},
			{"charge", "b", 0, 40, Admitted, 80},
			{"release", "a", 0, 10, Admitted, 70},
			{"charge", "a", 0, 10, Admitted, 80},
		}},
		{"the total refuses whoever asks past it", 100, 40, []step{
			{"charge", "a", 0, 40, Admitted, 40},
			{"charge", "b", 0, 40, Admitted, 80},
			{"charge", "c", 0, 30, Full, 80},
			{"charge", "c", 0, 20, Admitted, 100},
			{"charge", "d", 0, 0, Admitted, 100},
			{"charge", "d", 0, 1, Full, 100},
		}},
		{"a body larger than the share never fits, however empty", 100, 40, []step{
			{"charge", "a", 0, 41, TooLarge, 0},
			{"charge", "a", 0, 40, Admitted, 40},
		}},
		{"over its share and the total: the principal's share answers", 50, 40, []step{
			{"charge", "b", 0, 20, Admitted, 20},
			{"charge", "a", 0, 30, Admitted, 50},
			{"charge", "a", 0, 20, OverShare, 50},
		}},
		{"a resize up is charged the difference; down always fits", 100, 40, []step{
			{"charge", "a", 0, 10, Admitted, 10},
			{"resize", "a", 10, 35, Admitted, 35},
			{"resize", "a", 35, 45, TooLarge, 35},
			{"charge", "a", 0, 5, Admitted, 40},
			{"resize", "a", 5, 6, OverShare, 40},
			{"resize", "a", 35, 1, Admitted, 6},
		}},
		{"the share is at most the total", 30, 40, []step{
			{"charge", "a", 0, 31, TooLarge, 0},
			{"charge", "a", 0, 30, Admitted, 30},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := New(tc.total, tc.share)
			for i, s := range tc.steps {
				got := Admitted
				switch s.op {
				case "charge":
					got = b.Charge(s.principal, s.n)
				case "resize":
					got = b.Resize(s.principal, s.from, s.n)
				case "release":
					b.Release(s.principal, s.n)
				}
				if got != s.want || b.Used() != s.used {
					t.Fatalf("step %d (%s %s %d): got %v with %d in flight, want %v with %d", i, s.op, s.principal, s.n, got, b.Used(), s.want, s.used)
				}
			}
		})
	}
}

// TestBudgetForgetsIdlePrincipals: a principal whose bodies are all
// released holds no entry, so the budget's memory follows the bodies in
// flight, not the callers ever seen.
func TestBudgetForgetsIdlePrincipals(t *testing.T) {
	b := New(1<<30, 1<<20)
	for i := range 1000 {
		p := string(rune('a' + i%26))
		if o := b.Charge(p, 10); o != Admitted {
			t.Fatalf("charge %d: %v", i, o)
		}
		b.Release(p, 10)
	}
	if n := len(b.by); n != 0 || b.Used() != 0 {
		t.Errorf("got %d principals and %d bytes held after every release, want none", n, b.Used())
	}
}

// TestBudgetConcurrent: charges and releases from many goroutines at
// once never hold more than the limits (the budget's own counts, read
// after every charge), and leave nothing charged.
func TestBudgetConcurrent(t *testing.T) {
	const total, share = 1000, 300
	b := New(total, share)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			p := string(rune('a' + g%3))
			var held []int64
			for i := range 2000 {
				if n := int64(1 + (g*7+i*13)%120); b.Charge(p, n) == Admitted {
					held = append(held, n)
				}
				b.mu.Lock()
				if b.used > total || b.by[p] > share {
					t.Errorf("past the limits: %s holds %d, %d in flight", p, b.by[p], b.used)
				}
				b.mu.Unlock()
				if len(held) > 3 {
					b.Release(p, held[0])
					held = held[1:]
				}
			}
			for _, n := range held {
				b.Release(p, n)
			}
		})
	}
	wg.Wait()
	if b.Used() != 0 || len(b.by) != 0 {
		t.Errorf("after every release: %d bytes, %d principals held", b.Used(), len(b.by))
	}
}
