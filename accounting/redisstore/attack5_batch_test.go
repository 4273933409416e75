package redisstore

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/tokenwarden/tokenwarden/accounting"
	"github.com/tokenwarden/tokenwarden/internal/redistest"
)

// TestBatchQueuedCallLeavesWhenCancelled cancels a call queued behind one
// still on its way to Redis: it returns at once, not sent (not applied),
// rather than wait for a round trip that may last the whole store
// timeout; and the batcher goes on without it.
func TestBatchQueuedCallLeavesWhenCancelled(t *testing.T) {
	srv := redistest.Start(t)
	s, h := heldStore(t, srv)
	admin := adminClient(t, srv)
	c := fixedCounter("batch-leave", 100, time.Hour)
	req := func(id string) accounting.ReserveRequest {
		return accounting.ReserveRequest{ID: id, Items: []accounting.ReserveItem{{Counter: c, Amount: 10}}}
	}

	first := make(chan error, 1)
	go func() {
		_, err := s.Reserve(context.Background(), req("first"))
		first <- err
	}()
	<-h.held
	ctx, cancel := context.WithCancel(context.Background())
	gone := make(chan error, 1)
	go func() {
		_, err := s.Reserve(ctx, req("gone"))
		gone <- err
	}()
	queued(t, s, 1)
	cancel()
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
	if _, err := s.Reserve(context.Background(), req("next")); err != nil {
		t.Fatalf("a reservation after: %v", err)
	}
	if used := fixedUsed(t, admin, c.Key); used != 20 {
		t.Errorf("used: got %d, want 20 (first and next only)", used)
	}
}
