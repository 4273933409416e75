package accounting

import (
	"runtime"
	"sync"
	"testing"
)

// hasTurn reports whether w's turn has come, without waiting.
func hasTurn(w *waiter) bool {
	select {
	case <-w.turn:
		return true
	default:
		return false
	}
}

func TestWaitQueueServesALineInOrder(t *testing.T) {
	q := newWaitQueue(10, 10)
	a, b, c := q.join("k"), q.join("k"), q.join("k")
	if !hasTurn(a) || hasTurn(b) || hasTurn(c) {
		t.Fatalf("turns after joining: got a=%v b=%v c=%v, want only a", hasTurn(a), hasTurn(b), hasTurn(c))
	}
	q.leave("k", a)
	if !hasTurn(b) || hasTurn(c) {
		t.Fatalf("turns after a left: got b=%v c=%v, want only b", hasTurn(b), hasTurn(c))
	}
	q.leave("k", b)
	if !hasTurn(c) {
		t.Fatal("c's turn did not come after b left")
	}
	q.leave("k", c)
	if inLine, total := q.waiting("k"); inLine != 0 || total != 0 {
		t.Errorf("after all left: got %d in line, %d in all, want 0, 0", inLine, total)
	}
	if len(q.lines) != 0 {
		t.Errorf("an empty line is kept: %d lines", len(q.lines))
	}
}

func TestWaitQueueLeavingFromTheMiddle(t *testing.T) {
	q := newWaitQueue(10, 10)
	a, b, c := q.join("k"), q.join("k"), q.join("k")
	// b gives up (its client left): a keeps the turn, and c is next.
	q.leave("k", b)
	if !hasTurn(a) || hasTurn(c) {
		t.Fatalf("after b left: got a=%v c=%v, want only a", hasTurn(a), hasTurn(c))
	}
	q.leave("k", b) // twice: a no-op
	if inLine, total := q.waiting("k"); inLine != 2 || total != 2 {
		t.Fatalf("after b left twice: got %d in line, %d in all, want 2, 2", inLine, total)
	}
	q.leave("k", a)
	if !hasTurn(c) {
		t.Fatal("c's turn did not come after a left")
	}
}

func TestWaitQueueKeysAreIndependent(t *testing.T) {
	q := newWaitQueue(10, 2)
	a1, a2 := q.join("tenant-a"), q.join("tenant-a")
	if q.join("tenant-a") != nil {
		t.Fatal("a third waiter joined a line bounded at 2")
	}
	// Tenant a's full line neither delays nor bounds tenant b's.
	b1 := q.join("tenant-b")
	if b1 == nil || !hasTurn(b1) {
		t.Fatalf("tenant b's first waiter: got %v, want its turn at once", b1)
	}
	if !hasTurn(a1) || hasTurn(a2) {
		t.Errorf("tenant a: got a1=%v a2=%v, want only a1", hasTurn(a1), hasTurn(a2))
	}
}

func TestWaitQueueBounds(t *testing.T) {
	tests := []struct {
		name        string
		max, perKey int
		joins       []string
		want        []bool // whether each join got a place
	}{
		{"per key", 10, 2, []string{"k", "k", "k", "j"}, []bool{true, true, false, true}},
		{"in all", 3, 10, []string{"k", "j", "i", "h", "k"}, []bool{true, true, true, false, false}},
		{"defaults", 0, 0, []string{"k"}, []bool{true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			q := newWaitQueue(tt.max, tt.perKey)
			for i, key := range tt.joins {
				if got := q.join(key) != nil; got != tt.want[i] {
					t.Errorf("join %d (%s): got a place %v, want %v", i, key, got, tt.want[i])
				}
			}
		})
	}
	t.Run("a place frees when a waiter leaves", func(t *testing.T) {
		q := newWaitQueue(1, 1)
		w := q.join("k")
		if q.join("j") != nil {
			t.Fatal("joined past the bound")
		}
		q.leave("k", w)
		if q.join("j") == nil {
			t.Fatal("no place after the only waiter left")
		}
	})
}

// TestWaitQueueOneTurnAtATime: many waiters on a few keys, joining and
// leaving at once (run with -race): within a key no two ever hold the
// turn together, and every one gets it.
func TestWaitQueueOneTurnAtATime(t *testing.T) {
	const keys, perKey = 4, 50
	q := newWaitQueue(keys*perKey, perKey)
	var mu sync.Mutex
	holding := map[string]int{}
	served := 0
	var wg sync.WaitGroup
	for i := range keys * perKey {
		key := string(rune('a' + i%keys))
		wg.Go(func() {
			w := q.join(key)
			if w == nil {
				t.Error("a waiter found no place")
				return
			}
			<-w.turn
			mu.Lock()
			holding[key]++
			if holding[key] != 1 {
				t.Errorf("key %s: %d waiters hold the turn at once", key, holding[key])
			}
			mu.Unlock()
			runtime.Gosched() // let another one in, if the queue would
			mu.Lock()
			holding[key]--
			served++
			mu.Unlock()
			q.leave(key, w)
		})
	}
	wg.Wait()
	if served != keys*perKey {
		t.Errorf("served %d waiters, want %d", served, keys*perKey)
	}
	if _, total := q.waiting(""); total != 0 {
		t.Errorf("%d still waiting, want 0", total)
	}
}
