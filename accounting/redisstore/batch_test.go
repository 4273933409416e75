package redisstore

import (
	"context"
	"errors"
	"fmt"
	"net"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tokenwarden/tokenwarden/accounting"
	"github.com/tokenwarden/tokenwarden/internal/redistest"
)

// holdFirst is a client hook that holds the first command it sees once
// armed, until released, and records the size of every pipeline.
type holdFirst struct {
	armed   chan struct{} // closed to arm
	held    chan struct{} // closed when the first command is held
	release chan struct{} // closed to let it go

	once      sync.Once
	mu        sync.Mutex
	pipelines []int
}

func newHoldFirst() *holdFirst {
	return &holdFirst{armed: make(chan struct{}), held: make(chan struct{}), release: make(chan struct{})}
}

func (h *holdFirst) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *holdFirst) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		select {
		case <-h.armed:
			h.once.Do(func() {
				close(h.held)
				<-h.release
			})
		default:
		}
		return next(ctx, cmd)
	}
}

func (h *holdFirst) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		h.mu.Lock()
		h.pipelines = append(h.pipelines, len(cmds))
		h.mu.Unlock()
		return next(ctx, cmds)
	}
}

// queued waits until n calls wait in s's batcher (failing t if they have
// not after ten seconds: a store that does not queue would hang the test).
func queued(t *testing.T, s *Store, n int) {
	t.Helper()
	for start := time.Now(); ; runtime.Gosched() {
		s.batch.mu.Lock()
		k := len(s.batch.queue)
		s.batch.mu.Unlock()
		if k >= n {
			return
		}
		if time.Since(start) > 10*time.Second {
			t.Fatalf("calls queued: got %d, want %d", k, n)
		}
	}
}

// heldStore returns a Store on srv whose next call is held by the
// returned hook (the library is loaded first).
func heldStore(t *testing.T, srv *redistest.Server) (*Store, *holdFirst) {
	t.Helper()
	s := newStore(t, srv, Options{})
	if err := s.loadLibrary(context.Background()); err != nil {
		t.Fatalf("loading the library: %v", err)
	}
	h := newHoldFirst()
	s.client.(*redis.Client).AddHook(h)
	close(h.armed)
	return s, h
}

// TestBatchSharesRoundTrips holds one call on its way to Redis while five
// more are made: the five go as one pipeline once it is answered, and
// each gets its own answer, in the order Redis ran them.
func TestBatchSharesRoundTrips(t *testing.T) {
	srv := redistest.Start(t)
	s, h := heldStore(t, srv)
	admin := adminClient(t, srv)
	c := fixedCounter("batch", 100, time.Hour)
	reserve := func(id string, amount int64) (accounting.ReserveResult, error) {
		return s.Reserve(context.Background(), accounting.ReserveRequest{ID: id, Items: []accounting.ReserveItem{{Counter: c, Amount: amount}}})
	}

	first := make(chan error, 1)
	go func() {
		_, err := reserve("first", 1)
		first <- err
	}()
	<-h.held
	const n = 5
	results := make([]accounting.ReserveResult, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { results[i], errs[i] = reserve(fmt.Sprintf("r%d", i), 20) })
	}
	queued(t, s, n)
	close(h.release)
	if err := <-first; err != nil {
		t.Fatalf("first reservation: %v", err)
	}
	wg.Wait()

	if got, want := h.pipelines, []int{n}; !slices.Equal(got, want) {
		t.Errorf("pipelines sent (commands in each): got %v, want %v", got, want)
	}
	// 1 + 4×20 fit in 100, a fifth 20 does not: whichever Redis ran last
	// is refused, and each admitted one sees the level its own charge
	// left.
	var remaining []int64
	refused := 0
	for i := range n {
		switch {
		case errs[i] != nil:
			t.Errorf("reservation r%d: %v", i, errs[i])
		case results[i].Admitted:
			remaining = append(remaining, results[i].States[0].Remaining)
		default:
			refused++
		}
	}
	slices.Sort(remaining)
	if want := []int64{19, 39, 59, 79}; refused != 1 || !slices.Equal(remaining, want) {
		t.Errorf("got %d refused and remaining %v, want 1 refused and remaining %v", refused, remaining, want)
	}
	if used := fixedUsed(t, admin, c.Key); used != 81 {
		t.Errorf("used: got %d, want 81", used)
	}
}

// queuedCancel is a store whose first reservation ("first", 10 on c) is
// held on its way to Redis while a second ("gone"), queued behind it, has
// been cancelled; first and gone receive the two calls' errors.
type queuedCancel struct {
	s           *Store
	h           *holdFirst
	admin       *redis.Client
	c           accounting.Counter
	first, gone chan error
}

// req is a reservation of 10 on q's counter.
func (q *queuedCancel) req(id string) accounting.ReserveRequest {
	return accounting.ReserveRequest{ID: id, Items: []accounting.ReserveItem{{Counter: q.c, Amount: 10}}}
}

// cancelWhileQueued starts a redis-server and returns a queuedCancel on
// it, the counter named name.
func cancelWhileQueued(t *testing.T, name string) *queuedCancel {
	srv := redistest.Start(t)
	s, h := heldStore(t, srv)
	q := &queuedCancel{s: s, h: h, admin: adminClient(t, srv), c: fixedCounter(name, 100, time.Hour),
		first: make(chan error, 1), gone: make(chan error, 1)}
	go func() {
		_, err := s.Reserve(context.Background(), q.req("first"))
		q.first <- err
	}()
	<-h.held
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		_, err := s.Reserve(ctx, q.req("gone"))
		q.gone <- err
	}()
	queued(t, s, 1)
	cancel()
	return q
}

// TestBatchCallEndedWhileQueued cancels a call while it waits for its
// turn: it is never sent, and says so (not applied: the Limiter need not
// release it).
func TestBatchCallEndedWhileQueued(t *testing.T) {
	q := cancelWhileQueued(t, "batch-cancel")
	h, admin, c, first, gone := q.h, q.admin, q.c, q.first, q.gone
	close(h.release)
	if err := <-first; err != nil {
		t.Fatalf("first reservation: %v", err)
	}
	err := <-gone
	if !errors.Is(err, accounting.ErrStoreUnavailable) || !errors.Is(err, accounting.ErrNotApplied) || !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled while queued: got %v, want ErrStoreUnavailable, ErrNotApplied and context.Canceled", err)
	}
	if used := fixedUsed(t, admin, c.Key); used != 10 {
		t.Errorf("used: got %d, want 10 (the first reservation only)", used)
	}
	if n := admin.Exists(context.Background(), RecordKeyPrefix+"gone").Val(); n != 0 {
		t.Errorf("the cancelled reservation left a record")
	}
}

// TestBatchBrokenPipeline breaks the connection of a pipeline whose calls
// Redis may have run: each call gets the error, none is marked not
// applied (the Limiter must release them), and the next call goes through.
func TestBatchBrokenPipeline(t *testing.T) {
	srv := redistest.Start(t)
	s, h := heldStore(t, srv)
	c := fixedCounter("batch-broken", 100, time.Hour)
	req := func(id string) accounting.ReserveRequest {
		return accounting.ReserveRequest{ID: id, Items: []accounting.ReserveItem{{Counter: c, Amount: 10}}}
	}
	s.client.(*redis.Client).AddHook(breakPipelines{})

	first := make(chan error, 1)
	go func() {
		_, err := s.Reserve(context.Background(), req("first"))
		first <- err
	}()
	<-h.held
	const n = 3
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { _, errs[i] = s.Reserve(context.Background(), req(fmt.Sprintf("r%d", i))) })
	}
	queued(t, s, n)
	close(h.release)
	if err := <-first; err != nil {
		t.Fatalf("first reservation: %v", err)
	}
	wg.Wait()
	for i, err := range errs {
		if !errors.Is(err, accounting.ErrStoreUnavailable) || errors.Is(err, accounting.ErrNotApplied) {
			t.Errorf("r%d in a broken pipeline: got %v, want ErrStoreUnavailable and not ErrNotApplied", i, err)
		}
	}
	if _, err := s.Reserve(context.Background(), req("after")); err != nil {
		t.Errorf("a call after the broken pipeline: %v", err)
	}
}

// breakPipelines fails every pipeline as a connection reset after sending
// would.
type breakPipelines struct{}

func (breakPipelines) DialHook(next redis.DialHook) redis.DialHook          { return next }
func (breakPipelines) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }
func (breakPipelines) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := &net.OpError{Op: "read", Net: "tcp", Err: errors.New("connection reset by peer")}
		for _, cmd := range cmds {
			cmd.SetErr(err)
		}
		return err
	}
}

// lateTimer is a context whose deadline has passed but whose timer has
// not fired yet, as a loaded machine leaves one for a moment.
type lateTimer struct{ context.Context }

func (lateTimer) Deadline() (time.Time, bool) { return time.Unix(1, 0), true }

// TestBatchDeadlinePassed queues a call whose deadline has passed (its
// timer not yet fired) beside one with time left: the first is answered
// as never sent, and does not end its batchmate's pipeline.
func TestBatchDeadlinePassed(t *testing.T) {
	srv := redistest.Start(t)
	s, h := heldStore(t, srv)
	c := fixedCounter("batch-late", 100, time.Hour)
	req := func(id string) accounting.ReserveRequest {
		return accounting.ReserveRequest{ID: id, Items: []accounting.ReserveItem{{Counter: c, Amount: 10}}}
	}

	first := make(chan error, 1)
	go func() {
		_, err := s.Reserve(context.Background(), req("first"))
		first <- err
	}()
	<-h.held
	late := make(chan error, 1)
	go func() {
		_, err := s.Reserve(lateTimer{context.Background()}, req("late"))
		late <- err
	}()
	queued(t, s, 1)
	onTime := make(chan error, 1)
	go func() {
		_, err := s.Reserve(context.Background(), req("on-time"))
		onTime <- err
	}()
	queued(t, s, 2)
	close(h.release)
	if err := <-first; err != nil {
		t.Fatalf("first reservation: %v", err)
	}
	if err := <-late; !errors.Is(err, accounting.ErrNotApplied) || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("a call past its deadline: got %v, want ErrNotApplied and context.DeadlineExceeded", err)
	}
	if err := <-onTime; err != nil {
		t.Errorf("its batchmate with time left: got %v, want no error", err)
	}
}
