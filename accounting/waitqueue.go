package accounting

import (
	"slices"
	"sync"
)

// waitQueue orders the requests that wait for capacity: one FIFO line per
// counter key, bounded per key and in all. It decides only whose turn it
// is to ask the store; the store decides whether the turn admits.
type waitQueue struct {
	mu     sync.Mutex
	lines  map[string][]*waiter
	n      int // waiters in all lines
	max    int
	perKey int
}

// waiter is one request in a line. turn is closed when it heads the line.
type waiter struct {
	turn chan struct{}
}

func newWaitQueue(max, perKey int) *waitQueue {
	if max <= 0 {
		max = DefaultMaxWaiting
	}
	if perKey <= 0 {
		perKey = DefaultMaxWaitingPerKey
	}
	return &waitQueue{lines: make(map[string][]*waiter), max: max, perKey: perKey}
}

// join adds a waiter at the end of key's line, its turn already come if
// the line was empty; nil when either bound is reached.
func (q *waitQueue) join(key string) *waiter {
	q.mu.Lock()
	defer q.mu.Unlock()
	line := q.lines[key]
	if q.n >= q.max || len(line) >= q.perKey {
		return nil
	}
	w := &waiter{turn: make(chan struct{})}
	if len(line) == 0 {
		close(w.turn)
	}
	q.lines[key] = append(line, w)
	q.n++
	return w
}

// leave takes w out of key's line, wherever it is (a waiter that gives
// up leaves from the middle), and gives the turn to the next one if w had
// it. Leaving twice is a no-op.
func (q *waitQueue) leave(key string, w *waiter) {
	q.mu.Lock()
	defer q.mu.Unlock()
	line := q.lines[key]
	i := slices.Index(line, w)
	if i < 0 {
		return
	}
	q.n--
	if len(line) == 1 {
		// The map keeps no empty lines: keys come from requests, and an
		// idle scope must cost nothing.
		delete(q.lines, key)
		return
	}
	line = slices.Delete(line, i, i+1)
	if i == 0 {
		close(line[0].turn)
	}
	q.lines[key] = line
}

// waiting returns how many wait in key's line, and in all.
func (q *waitQueue) waiting(key string) (inLine, total int) {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.lines[key]), q.n
}
