package redisstore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// A round trip to Redis costs tokenwarden more in the kernel than in Go:
// measured on a replica's whole lifecycle (BENCHMARKS.md, "The Redis
// store's client side"), the Redis store runs about as many user-space
// instructions as the memory store, but each call makes four or five
// system calls (go-redis's health check of the pooled connection, the
// write, a read that finds nothing yet, the poller's wait, the read of the
// answer), and those, not Go, are what the Redis store adds.
//
// A batcher sends the calls that would wait for one another as one
// pipeline, as a database's group commit does: a call made while no
// pipeline is on its way is sent at once, alone; calls made while one is
// on its way queue, and the first of them sends the whole queue as the
// next pipeline as soon as the previous one is answered. A lone call
// waits for nothing; under load, several calls share each round trip's
// system calls. Redis runs each FCALL of a pipeline atomically and on its
// own, as if it had come alone; only their answers share the trip.
//
// It is used on a single server (or a Sentinel-monitored master) only: a
// cluster client splits a pipeline by node and may send its commands
// again after a broken connection, which a reservation must never be.
type batcher struct {
	client *redis.Client

	mu sync.Mutex
	// sending is set while a call or a pipeline is on its way; the calls
	// made meanwhile wait in queue.
	sending bool
	queue   []*waiter
}

// waiter is one call in a batcher.
type waiter struct {
	ctx context.Context
	cmd *redis.Cmd
	// batch, when set before done is signalled, is the pipeline this call
	// must send (itself first); otherwise done says cmd is answered.
	batch []*waiter
	done  chan struct{}
}

// errNotSent is the error of a call whose context ended while it waited
// for its turn: it never reached Redis.
var errNotSent = errors.New("redisstore: the call's context ended before it was sent")

func newBatcher(c *redis.Client) *batcher { return &batcher{client: c} }

// process sends cmd, in a pipeline with the calls queued beside it, and
// returns once it is answered (its result or error is in cmd).
func (b *batcher) process(ctx context.Context, cmd *redis.Cmd) {
	b.mu.Lock()
	if !b.sending {
		b.sending = true
		b.mu.Unlock()
		// Alone: a plain command, on the caller's own context.
		if err := ctx.Err(); err != nil {
			cmd.SetErr(fmt.Errorf("%w: %w", errNotSent, err))
		} else {
			_ = b.client.Process(ctx, noRetryCmd{cmd})
		}
		b.next()
		return
	}
	w := &waiter{ctx: ctx, cmd: cmd, done: make(chan struct{}, 1)}
	b.queue = append(b.queue, w)
	b.mu.Unlock()
	select {
	case <-w.done:
	case <-ctx.Done():
		// A call whose context ends while it is still queued leaves the
		// queue, not sent, rather than wait for the round trip ahead of
		// it, which may last the whole store timeout. Once next has
		// taken the queue it is too late: the call is on its way (or
		// must send its batchmates), and waits for its answer.
		b.mu.Lock()
		if i := slices.Index(b.queue, w); i >= 0 {
			b.queue = slices.Delete(b.queue, i, i+1)
			b.mu.Unlock()
			cmd.SetErr(fmt.Errorf("%w: %w", errNotSent, ctx.Err()))
			return
		}
		b.mu.Unlock()
		<-w.done
	}
	if w.batch != nil {
		b.send(w.batch)
		b.next()
	}
}

// next hands the queue to its first call, which sends it; or, with
// nothing queued, lets the next call send at once.
func (b *batcher) next() {
	b.mu.Lock()
	q := b.queue
	b.queue = nil
	if len(q) == 0 {
		b.sending = false
	}
	b.mu.Unlock()
	if len(q) > 0 {
		q[0].batch = q
		q[0].done <- struct{}{}
	}
}

// send sends batch (whose first call is the caller's own) as one
// pipeline and wakes the other calls with their answers. A call whose
// context has ended is not sent. The pipeline is bounded by the earliest
// deadline among the calls, so that none waits past its own; it is not
// cancelled with any one call's context, since the others' answers ride
// on it.
func (b *batcher) send(batch []*waiter) {
	live := 0
	for _, w := range batch {
		if err := w.ctx.Err(); err != nil {
			w.cmd.SetErr(fmt.Errorf("%w: %w", errNotSent, err))
			continue
		}
		live++
	}
	if live == 1 && len(batch) == 1 {
		_ = b.client.Process(batch[0].ctx, noRetryCmd{batch[0].cmd})
		return
	}
	ctx, cancel := b.bound(batch)
	if ctx != nil {
		pipe := b.client.Pipeline()
		for _, w := range batch {
			if w.cmd.Err() == nil {
				_ = pipe.Process(ctx, noRetryCmd{w.cmd})
			}
		}
		_, _ = pipe.Exec(ctx)
		cancel()
	}
	for _, w := range batch[1:] {
		w.done <- struct{}{}
	}
}

// bound returns the context of the pipeline of the calls of batch not yet
// answered: the earliest of their deadlines. A call whose deadline has
// passed, though its context's timer has not fired yet, is answered as
// not sent rather than let it end its batchmates' pipeline at once. It
// returns nil when no call is left to send.
func (b *batcher) bound(batch []*waiter) (context.Context, context.CancelFunc) {
	for {
		var earliest time.Time
		left := false
		for _, w := range batch {
			if w.cmd.Err() != nil {
				continue
			}
			left = true
			if d, ok := w.ctx.Deadline(); ok && (earliest.IsZero() || d.Before(earliest)) {
				earliest = d
			}
		}
		switch {
		case !left:
			return nil, nil
		case earliest.IsZero():
			return context.Background(), func() {}
		}
		ctx, cancel := context.WithDeadline(context.Background(), earliest)
		if ctx.Err() == nil {
			return ctx, cancel
		}
		cancel()
		for _, w := range batch {
			if d, ok := w.ctx.Deadline(); ok && w.cmd.Err() == nil && !d.After(earliest) {
				w.cmd.SetErr(fmt.Errorf("%w: %w", errNotSent, context.DeadlineExceeded))
			}
		}
	}
}
