package redisstore

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/tokenwarden/tokenwarden/accounting"
)

// TestBatchQueuedCallLeavesWhenCancelled cancels a call queued behind one
// still on its way to Redis: it returns at once, not sent (not applied),
// rather than wait for a round trip that may last the whole store
// timeout; and the batcher goes on without it.
func TestBatchQueuedCallLeavesWhenCancelled(t *testing.T) {
	q := cancelWhileQueued(t, "batch-leave")
	s, h, admin, c, first, gone := q.s, q.h, q.admin, q.c, q.first, q.gone
	var err error
	select {
	case err = <-gone:
	case <-time.After(10 * time.Second):
		// The first call is still held: a queued call that waits for it
		// never returns.
		close(h.release)
		<-first
		<-gone
		t.Fatalf("a cancelled queued call waited for the call ahead of it to be answered")
	}
	if !errors.Is(err, accounting.ErrNotApplied) || !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled while queued: got %v, want ErrNotApplied and context.Canceled", err)
	}
	s.batch.mu.Lock()
	left := len(s.batch.queue)
	s.batch.mu.Unlock()
	if left != 0 {
		t.Errorf("calls queued after the cancelled one left: got %d, want 0", left)
	}
	close(h.release)
	if err := <-first; err != nil {
		t.Fatalf("first reservation: %v", err)
	}
	if _, err := s.Reserve(context.Background(), q.req("next")); err != nil {
		t.Fatalf("a reservation after: %v", err)
	}
	if used := fixedUsed(t, admin, c.Key); used != 20 {
		t.Errorf("used: got %d, want 20 (first and next only)", used)
	}
}
