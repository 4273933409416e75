package extproc_test

// TestLedger's book: what each lifecycle must cost, matched with the
// settlement the server logs for it, and added up per counter.

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/tokenwarden/tokenwarden/accounting"
	"github.com/tokenwarden/tokenwarden/extproc"
	"github.com/tokenwarden/tokenwarden/internal/envoytest"
)

// ledgerAttrs are a lifecycle's attributes as the limits see them.
func ledgerAttrs(tenant, user int, model string) accounting.Attributes {
	attrs := accounting.Attributes{{Name: "tenant", Value: "t" + strconv.Itoa(tenant)}}
	if user >= 0 {
		attrs = append(attrs, accounting.Attribute{Name: "user", Value: "u" + strconv.Itoa(user)})
	}
	return append(attrs, accounting.Attribute{Name: accounting.AttributeModel, Value: model})
}

// ledgerKey names limit l's counter for attrs ("ledger-tokens
// tenant=t1"), or reports that l does not apply.
func ledgerKey(l *accounting.Limit, attrs accounting.Attributes) (string, bool) {
	if !l.Applies(attrs) {
		return "", false
	}
	key := l.Name
	for _, name := range l.Scope {
		v, _ := attrs.Get(name)
		key += " " + name + "=" + v
	}
	return key, true
}

// ledgerBook matches each admitted lifecycle with its settlement, as the
// server logs it, and adds up what every counter must hold.
type ledgerBook struct {
	limits []accounting.Limit

	mu sync.Mutex
	// awaiting are admitted lifecycles whose settlement is not logged
	// yet; logged are settlements logged before their lifecycle ended.
	awaiting map[string]ledgerEntry
	logged   map[string]ledgerSettled
	// want is what each counter must hold, by ledgerKey.
	want                                         map[string]int64
	admitted, rejected, unavailable, settlements int64
	byKind                                       [numLedgerKinds]int64
	anthropic                                    int64
	byBasis                                      map[string]int64
	problems                                     []string
	nproblems                                    int
}

type ledgerEntry struct {
	life   *ledgerLife
	charge ledgerCharge
}

type ledgerSettled struct {
	basis  string
	tokens int64
}

func newLedgerBook(limits []accounting.Limit) *ledgerBook {
	return &ledgerBook{limits: limits, awaiting: map[string]ledgerEntry{}, logged: map[string]ledgerSettled{},
		want: map[string]int64{}, byBasis: map[string]int64{}}
}

// problem records a failure; the first few are reported in full.
func (b *ledgerBook) problem(format string, args ...any) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.problemLocked(format, args...)
}

func (b *ledgerBook) problemLocked(format string, args ...any) {
	b.nproblems++
	if len(b.problems) < 20 {
		b.problems = append(b.problems, fmt.Sprintf(format, args...))
	}
}

func (b *ledgerBook) count(lf *ledgerLife) {
	b.mu.Lock()
	b.byKind[lf.kind]++
	if lf.anthropic {
		b.anthropic++
	}
	b.mu.Unlock()
}

// refused books a 503 for a store that could not be reached: the
// attempt must have met the restart (begun before every replica reached
// Redis again, ended after it was killed), and never reached the
// upstream.
func (b *ledgerBook) refused(lf *ledgerLife, before, after int32, upstreamCalled bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.unavailable++
	if before > 1 || after < 1 {
		b.problemLocked("%s: 503 outside the restart (Redis generation %d to %d)", lf, before, after)
	}
	if upstreamCalled {
		b.problemLocked("%s: refused with 503, and the upstream called", lf)
	}
}

// reject books a 429: only t0's tight limit may reject, and the upstream
// must not be called.
func (b *ledgerBook) reject(lf *ledgerLife, resp *envoytest.Response, md map[string]any) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.rejected++
	if resp.Status != 429 || md[extproc.MetaLimit] != "ledger-t0-tokens" || lf.tenant != 0 {
		b.problemLocked("%s: rejected with %d by %v", lf, resp.Status, md[extproc.MetaLimit])
	}
	if lf.chunks != nil {
		b.problemLocked("%s: rejected, and the upstream called", lf)
	}
}

// admit books an admitted lifecycle with the charge it must settle on.
func (b *ledgerBook) admit(id string, lf *ledgerLife, c ledgerCharge) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.admitted++
	if s, ok := b.logged[id]; ok {
		delete(b.logged, id)
		b.match(id, ledgerEntry{lf, c}, s)
		return
	}
	if _, ok := b.awaiting[id]; ok || id == "" {
		b.problemLocked("%s: reservation ID %q not unique", lf, id)
		return
	}
	b.awaiting[id] = ledgerEntry{lf, c}
}

// settled books a settlement the server logged.
func (b *ledgerBook) settled(id, basis string, tokens int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.settlements++
	s := ledgerSettled{basis, tokens}
	if e, ok := b.awaiting[id]; ok {
		delete(b.awaiting, id)
		b.match(id, e, s)
		return
	}
	if _, ok := b.logged[id]; ok {
		b.problemLocked("reservation %s settled twice before its lifecycle ended", id)
		return
	}
	// Its lifecycle has not ended yet — or it was settled already, which
	// leaves it here for the end of the test to find.
	b.logged[id] = s
}

// match checks a settlement against the charge predicted for it, and
// books the prediction on every counter the lifecycle's limits keep.
func (b *ledgerBook) match(id string, e ledgerEntry, s ledgerSettled) {
	lf, c := e.life, e.charge
	b.byBasis[c.basis]++
	if s.basis != c.basis || s.tokens != c.tokens() {
		b.problemLocked("%s: reservation %s settled on %s for %d tokens, want %s for %d", lf, id, s.basis, s.tokens, c.basis, c.tokens())
	}
	attrs := ledgerAttrs(lf.tenant, lf.user, lf.model.name)
	for i := range b.limits {
		l := &b.limits[i]
		key, ok := ledgerKey(l, attrs)
		if !ok {
			continue
		}
		switch l.Dimension {
		case accounting.Tokens:
			b.want[key] += c.tokens()
		case accounting.Cost:
			b.want[key] += lf.model.cost(c.input, c.cached, c.output)
		case accounting.Requests:
			b.want[key]++
		case accounting.Concurrent:
			// The lease is returned: nothing stays.
		}
	}
}

func (b *ledgerBook) kinds() string {
	var parts []string
	for k, n := range b.byKind {
		parts = append(parts, fmt.Sprintf("%s %d", ledgerKind(k), n))
	}
	return strings.Join(parts, ", ")
}

func (b *ledgerBook) bases() string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(b.byBasis)) {
		parts = append(parts, fmt.Sprintf("%s %d", k, b.byBasis[k]))
	}
	return strings.Join(parts, ", ")
}

func anyEntry(m map[string]ledgerEntry) string {
	for id, e := range m {
		return id + ": " + e.life.String()
	}
	return ""
}

func anyKey(m map[string]ledgerSettled) string {
	for id, s := range m {
		return fmt.Sprintf("%s on %s for %d tokens", id, s.basis, s.tokens)
	}
	return ""
}

// ledgerLog is the replicas' slog handler: it hands each settlement the
// server logs to the book, and counts warnings and errors by message.
type ledgerLog struct {
	book   *ledgerBook
	mu     sync.Mutex
	counts map[string]int
}

func (h *ledgerLog) Enabled(context.Context, slog.Level) bool { return true }

func (h *ledgerLog) Handle(_ context.Context, r slog.Record) error {
	if r.Message == "settled" {
		var id, basis string
		var tokens int64
		r.Attrs(func(a slog.Attr) bool {
			switch a.Key {
			case "reservation":
				id = a.Value.String()
			case "basis":
				basis = a.Value.String()
			case "actual_tokens":
				tokens = a.Value.Int64()
			}
			return true
		})
		h.book.settled(id, basis, tokens)
		return nil
	}
	if r.Level >= slog.LevelWarn {
		msg := r.Message
		r.Attrs(func(a slog.Attr) bool {
			if a.Key == "err" {
				msg += ": " + a.Value.String()
			}
			return true
		})
		h.mu.Lock()
		h.counts[msg]++
		h.mu.Unlock()
	}
	return nil
}

func (h *ledgerLog) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *ledgerLog) WithGroup(string) slog.Handler      { return h }

func (h *ledgerLog) warnings() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var parts []string
	for _, msg := range slices.Sorted(maps.Keys(h.counts)) {
		parts = append(parts, fmt.Sprintf("%q ×%d", msg, h.counts[msg]))
	}
	return strings.Join(parts, "; ")
}
