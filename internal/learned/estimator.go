package learned

import (
	"errors"
	"fmt"
	"strings"
	"sync"
)

// Key names the completions one estimate is learned from.
type Key struct {
	// API is the wire format, e.g. "openai.chat".
	API string
	// Model is the model's family.
	Model string
	// Scope holds the values of the scope attributes, encoded so that
	// distinct tuples never share a Key; "" when unscoped.
	Scope string
}

// MaxKeyBytes bounds the bytes of a Key: a longer one (a model name that
// is mostly padding) is not learned, and its requests reserve their cap.
const MaxKeyBytes = 2048

// MaxDecaySamples is the longest memory a sketch can have: its float32
// weights tell a decay of 1 − 1/MaxDecaySamples from none.
const MaxDecaySamples = 1_000_000

// Options configure an Estimator. Every field is required: the caller
// owns the defaults.
type Options struct {
	// Quantile is the share of completions the estimate covers, in (0, 1).
	Quantile float64
	// MinSamples is how many completions of a key must have been seen
	// before its estimate is given.
	MinSamples int64
	// DecaySamples is the memory of a sketch: each sample decays the
	// older ones by 1 − 1/DecaySamples. At least MinSamples, at most
	// MaxDecaySamples.
	DecaySamples int64
	// Floor is the least estimate given.
	Floor int64
	// MaxKeys bounds the keys held.
	MaxKeys int
}

// Validate reports what keeps the options from being used.
func (o *Options) Validate() error {
	var errs []error
	if !(o.Quantile > 0 && o.Quantile < 1) {
		errs = append(errs, fmt.Errorf("quantile %v is not in (0, 1)", o.Quantile))
	}
	if o.MinSamples < 1 {
		errs = append(errs, fmt.Errorf("min_samples %d is below 1", o.MinSamples))
	}
	switch {
	case o.DecaySamples < max(o.MinSamples, 1):
		errs = append(errs, fmt.Errorf("decay_samples %d is below min_samples", o.DecaySamples))
	case o.DecaySamples > MaxDecaySamples:
		errs = append(errs, fmt.Errorf("decay_samples %d is above %d", o.DecaySamples, MaxDecaySamples))
	}
	if o.Floor < 1 || o.Floor > MaxSample {
		errs = append(errs, fmt.Errorf("floor %d is outside 1..%d", o.Floor, MaxSample))
	}
	if o.MaxKeys < 1 {
		errs = append(errs, fmt.Errorf("max_keys %d is below 1", o.MaxKeys))
	}
	return errors.Join(errs...)
}

// Estimator holds the sketches of up to MaxKeys keys. It is safe for
// concurrent use.
type Estimator struct {
	opts Options
	keep float32 // 1 − 1/DecaySamples

	mu   sync.Mutex
	keys map[Key]*entry
	// head is the sentinel of the recency list: head.next is the most
	// recently used entry, head.prev the least.
	head entry
}

// entry is a key's sketch in the recency list.
type entry struct {
	key        Key
	s          sketch
	prev, next *entry
}

// New returns an Estimator, or the error of [Options.Validate].
func New(opts Options) (*Estimator, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	e := &Estimator{
		opts: opts,
		keep: float32(1 - 1/float64(opts.DecaySamples)),
		keys: make(map[Key]*entry),
	}
	e.head.prev, e.head.next = &e.head, &e.head
	return e, nil
}

// Estimate returns the learned estimate of a completion's output for
// key: quantile Quantile of its recent samples, at least Floor. ok is
// false until MinSamples completions of the key were observed. samples
// is how many were.
func (e *Estimator) Estimate(key Key) (tokens, samples int64, ok bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	en := e.keys[key]
	if en == nil {
		return 0, 0, false
	}
	e.touch(en)
	if en.s.count < e.opts.MinSamples {
		return 0, en.s.count, false
	}
	return max(en.s.quantile(e.opts.Quantile), e.opts.Floor), en.s.count, true
}

// Observe feeds key one completion's output. A key not held yet takes
// the place of the least recently used one when MaxKeys are held. A key
// longer than MaxKeyBytes is ignored.
func (e *Estimator) Observe(key Key, tokens int64) {
	if len(key.API)+len(key.Model)+len(key.Scope) > MaxKeyBytes {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	en := e.keys[key]
	switch {
	case en != nil:
		e.touch(en)
	case len(e.keys) >= e.opts.MaxKeys:
		// Reuse the least recently used entry's memory.
		en = e.head.prev
		e.unlink(en)
		delete(e.keys, en.key)
		*en = entry{}
		fallthrough
	default:
		if en == nil {
			en = &entry{}
		}
		// Own copies: the caller's strings may be views of a request.
		en.key = Key{API: strings.Clone(key.API), Model: strings.Clone(key.Model), Scope: strings.Clone(key.Scope)}
		e.keys[en.key] = en
		e.pushFront(en)
	}
	en.s.observe(tokens, e.keep)
}

// Len returns the number of keys held.
func (e *Estimator) Len() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.keys)
}

func (e *Estimator) touch(en *entry) {
	if e.head.next != en {
		e.unlink(en)
		e.pushFront(en)
	}
}

func (e *Estimator) unlink(en *entry) {
	en.prev.next, en.next.prev = en.next, en.prev
	en.prev, en.next = nil, nil
}

func (e *Estimator) pushFront(en *entry) {
	en.prev, en.next = &e.head, e.head.next
	e.head.next.prev = en
	e.head.next = en
}
