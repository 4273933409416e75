package extproc_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"

	"github.com/tokenwarden/tokenwarden/internal/envoytest"
)

// This file is TestLedger's schedule: what each lifecycle asks, what its
// upstream answers and how the client behaves, all drawn from the seed;
// and what the lifecycle must cost, worked out here from what the
// upstream reported and the documented settlement rules, without the
// server's code.

// ledgerKind is what happens to one lifecycle's response.
type ledgerKind uint8

const (
	// lkComplete: the whole response, which reports usage.
	lkComplete ledgerKind = iota
	// lkNoUsage: a whole stream from an upstream that ignores
	// include_usage and reports none.
	lkNoUsage
	// lkUpstreamError: the upstream answers 5xx.
	lkUpstreamError
	// lkCut: the client leaves after some of the body's chunks.
	lkCut
	// lkGoneBeforeHeaders: the client leaves before the response headers.
	lkGoneBeforeHeaders
	// lkGoneAfterHeaders: the client leaves once the response headers
	// are through, before any body.
	lkGoneAfterHeaders
	// lkDuplicateEnd: the whole response, told twice that it ended (a
	// second end_of_stream; a stream also repeats its usage and [DONE]).
	lkDuplicateEnd
	numLedgerKinds
)

var ledgerKindNames = [numLedgerKinds]string{
	"complete", "no_usage", "upstream_5xx", "cut", "gone_before_headers", "gone_after_headers", "duplicate_end",
}

func (k ledgerKind) String() string { return ledgerKindNames[k] }

// ledgerKindWeights are the kinds' shares of the schedule, in percent.
var ledgerKindWeights = [numLedgerKinds]int{40, 5, 10, 20, 7, 7, 11}

// ledgerModel is a model of the schedule and its price, per token, as a
// fraction num/div of a micro-dollar: the charge is worked out in
// integers, apart from the server's floating-point pricing.
type ledgerModel struct {
	name                     string
	input, cached, out       int64 // numerators
	div                      int64
	inUSD, cachedUSD, outUSD float64 // USD per 1M tokens, for the Limiter
}

var ledgerModels = []ledgerModel{
	{name: "gpt-4o-mini", input: 6, cached: 3, out: 24, div: 40, inUSD: 0.15, cachedUSD: 0.075, outUSD: 0.60},
	{name: "gpt-4.1", input: 4, cached: 1, out: 16, div: 2, inUSD: 2, cachedUSD: 0.50, outUSD: 8},
}

// ledgerClaude is the model of the Anthropic lifecycles; ledgerModels
// are the OpenAI ones.
var ledgerClaude = ledgerModel{name: "claude-sonnet-4-5", input: 30, cached: 3, out: 150, div: 10, inUSD: 3, cachedUSD: 0.30, outUSD: 15}

// cost is what usage costs on m, in micro-dollars rounded up: plain
// input, cached input and output each at their price.
func (m ledgerModel) cost(in, cached, out int64) int64 {
	n := (in-cached)*m.input + cached*m.cached + out*m.out
	return (n + m.div - 1) / m.div
}

const (
	ledgerTenants = 5
	ledgerUsers   = 3
)

// ledgerWords are the words of prompts and outputs: the test's token
// counter counts words, so every count here is a count of these.
var ledgerWords = []string{"alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel"}

// ledgerCounter is the server's token counter in TestLedger: one token a
// word, so that the test can count what the server counts.
type ledgerCounter struct{}

func (ledgerCounter) CountTokens(_, text string) int64 { return int64(len(strings.Fields(text))) }

func (ledgerCounter) ImageTokens(string, string, int, int) int64 { return 0 }

// ledgerLife is one lifecycle: the request, the upstream's behaviour and
// the client's.
type ledgerLife struct {
	replica, seq int
	kind         ledgerKind
	// anthropic: the Messages API; else OpenAI's chat completions.
	anthropic    bool
	stream       bool
	tenant, user int // user -1: no x-user-id
	model        ledgerModel
	messages     []int // words of each message's content
	outputCap    int64
	// What the upstream reports, and generates.
	prompt, cached, completion int64
	deltas                     []int // words of each streamed delta
	status                     int
	cutAfter                   int // chunks, for lkCut

	rng *rand.Rand
	// Set by the upstream when it answers: the body's chunks and the
	// stream's events.
	chunks [][]byte
	events []ledgerEvent
	// A JSON reply's generated text: the offset just past its closing
	// quote, and its words.
	textEnd   int
	textWords int64
	asked     bool // the request asked for usage in the stream
}

// ledgerEvent is one SSE event of a streamed response.
type ledgerEvent struct {
	end   int // offset just past its blank line
	words int64
	// usage: the event carries the final usage; start: Anthropic's
	// message_start, whose usage is a running total.
	usage, start bool
}

// newLedgerLife draws lifecycle seq of replica from seed.
func newLedgerLife(seed uint64, replica, seq int) *ledgerLife {
	rng := rand.New(rand.NewPCG(seed, uint64(replica)<<40|uint64(seq)))
	lf := &ledgerLife{replica: replica, seq: seq, rng: rng}
	w := rng.IntN(100)
	for k, share := range ledgerKindWeights {
		if w < share {
			lf.kind = ledgerKind(k)
			break
		}
		w -= share
	}
	// Anthropic streams always report usage: no lkNoUsage for them.
	lf.anthropic = lf.kind != lkNoUsage && rng.IntN(3) == 0
	lf.stream = lf.kind == lkNoUsage || rng.IntN(2) == 0
	lf.tenant = rng.IntN(ledgerTenants)
	lf.user = rng.IntN(ledgerUsers+1) - 1
	lf.model = ledgerModels[rng.IntN(len(ledgerModels))]
	if lf.anthropic {
		lf.model = ledgerClaude
	}
	for range 1 + rng.IntN(2) {
		lf.messages = append(lf.messages, 1+rng.IntN(40))
	}
	lf.outputCap = 16 + rng.Int64N(241)
	// The provider counts the prompt its own way: near the estimate,
	// not on it.
	lf.prompt = max(1, lf.inputEstimate()+rng.Int64N(11)-5)
	if rng.IntN(3) == 0 {
		lf.cached = rng.Int64N(lf.prompt + 1)
	}
	var words int64
	for range rng.IntN(int(min(lf.outputCap, 60)) + 1) {
		d := 1 + rng.IntN(2)
		lf.deltas = append(lf.deltas, d)
		words += int64(d)
	}
	lf.completion = min(lf.outputCap, words+rng.Int64N(4))
	lf.status = []int{500, 502, 503, 529}[rng.IntN(4)]
	return lf
}

func (lf *ledgerLife) String() string {
	api := "openai"
	if lf.anthropic {
		api = "anthropic"
	}
	return fmt.Sprintf("lifecycle %d of replica %d: %s %s stream=%v tenant=t%d user=%d model=%s messages=%v cap=%d prompt=%d cached=%d completion=%d deltas=%d cut_after=%d/%d",
		lf.seq, lf.replica, api, lf.kind, lf.stream, lf.tenant, lf.user, lf.model.name, lf.messages, lf.outputCap,
		lf.prompt, lf.cached, lf.completion, len(lf.deltas), lf.cutAfter, len(lf.chunks))
}

func (lf *ledgerLife) words(n int) string {
	var b strings.Builder
	for i := range n {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(ledgerWords[lf.rng.IntN(len(ledgerWords))])
	}
	return b.String()
}

// request is the client's request.
func (lf *ledgerLife) request() envoytest.Request {
	if lf.anthropic {
		return lf.messagesRequest()
	}
	var b strings.Builder
	fmt.Fprintf(&b, `{"model":%q,"max_tokens":%d,`, lf.model.name, lf.outputCap)
	if lf.stream {
		b.WriteString(`"stream":true,`)
	}
	b.WriteString(`"messages":[`)
	for i, n := range lf.messages {
		role := "user"
		if i == 0 && len(lf.messages) > 1 {
			role = "system"
		}
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"role":%q,"content":%q}`, role, lf.words(n))
	}
	b.WriteString(`]}`)
	return envoytest.Request{Path: "/v1/chat/completions", Headers: lf.headers(), Body: []byte(b.String())}
}

// messagesRequest is an Anthropic Messages request: a first message of
// two is the system prompt.
func (lf *ledgerLife) messagesRequest() envoytest.Request {
	var b strings.Builder
	fmt.Fprintf(&b, `{"model":%q,"max_tokens":%d,`, lf.model.name, lf.outputCap)
	if lf.stream {
		b.WriteString(`"stream":true,`)
	}
	msgs := lf.messages
	if len(msgs) > 1 {
		fmt.Fprintf(&b, `"system":%q,`, lf.words(msgs[0]))
		msgs = msgs[1:]
	}
	fmt.Fprintf(&b, `"messages":[{"role":"user","content":%q}]}`, lf.words(msgs[0]))
	return envoytest.Request{Path: "/v1/messages", Headers: lf.headers(), Body: []byte(b.String())}
}

func (lf *ledgerLife) headers() [][2]string {
	h := [][2]string{{"content-type", "application/json"}, {"x-tenant-id", "t" + strconv.Itoa(lf.tenant)}}
	if lf.user >= 0 {
		h = append(h, [2]string{"x-user-id", "u" + strconv.Itoa(lf.user)})
	}
	return h
}

// upstream answers like fakellm: usage in a stream only when the request
// asks for it (the server injects stream_options), except for
// lkNoUsage's upstream, which never reports it.
func (lf *ledgerLife) upstream(ur *envoytest.UpstreamRequest) envoytest.UpstreamResponse {
	up := envoytest.UpstreamResponse{Status: 200}
	var body string
	switch {
	case lf.kind == lkUpstreamError && lf.anthropic:
		up.Status = lf.status
		body = `{"type":"error","error":{"type":"api_error","message":"the upstream failed"}}`
	case lf.kind == lkUpstreamError:
		up.Status = lf.status
		body = `{"error":{"message":"the upstream failed","type":"server_error"}}`
	case lf.anthropic && lf.stream:
		body = lf.messagesSSE()
	case lf.anthropic:
		body = lf.messagesJSON()
	case lf.stream:
		lf.asked = strings.Contains(string(ur.Body), `"include_usage":true`)
		body = lf.sse(lf.asked && lf.kind != lkNoUsage)
	default:
		body = lf.json()
	}
	ctype := "application/json"
	if lf.stream && up.Status == 200 {
		ctype = "text/event-stream"
	}
	up.Headers = [][2]string{{"content-type", ctype}}
	// Chunks of random sizes: events and JSON split anywhere.
	for b := []byte(body); len(b) > 0; {
		n := min(len(b), 1+lf.rng.IntN(160))
		lf.chunks = append(lf.chunks, b[:n])
		b = b[n:]
	}
	switch lf.kind {
	case lkCut:
		if len(lf.chunks) < 2 {
			// Nothing to cut short: split it.
			c := lf.chunks[0]
			lf.chunks = [][]byte{c[:len(c)/2], c[len(c)/2:]}
		}
		lf.cutAfter = 1 + lf.rng.IntN(len(lf.chunks)-1)
		up.CutAfter = lf.cutAfter
	case lkGoneBeforeHeaders:
		up.CutBeforeHeaders = true
	case lkGoneAfterHeaders:
		up.CutAfterHeaders = true
	case lkDuplicateEnd:
		up.DuplicateEnd = true
	}
	up.Chunks = lf.chunks
	return up
}

func (lf *ledgerLife) usageJSON() string {
	return fmt.Sprintf(`{"prompt_tokens":%d,"completion_tokens":%d,"total_tokens":%d,"prompt_tokens_details":{"cached_tokens":%d}}`,
		lf.prompt, lf.completion, lf.prompt+lf.completion, lf.cached)
}

func (lf *ledgerLife) json() string {
	total := 0
	for _, d := range lf.deltas {
		total += d
	}
	head := fmt.Sprintf(`{"id":"chatcmpl-ledger","object":"chat.completion","model":%q,"choices":[{"index":0,"message":{"role":"assistant","content":%q`,
		lf.model.name, lf.words(total))
	lf.textEnd, lf.textWords = len(head), int64(total)
	return head + `},"finish_reason":"stop"}],"usage":` + lf.usageJSON() + "}"
}

// sse is a chat completion stream: a role chunk, a chunk per delta, the
// finish chunk, the usage chunk (if withUsage), [DONE]; lkDuplicateEnd
// repeats the last two.
func (lf *ledgerLife) sse(withUsage bool) string {
	var b strings.Builder
	usageNull := ""
	if withUsage {
		usageNull = `,"usage":null`
	}
	event := func(data string, words int64, usage bool) {
		b.WriteString("data: " + data + "\n\n")
		lf.events = append(lf.events, ledgerEvent{end: b.Len(), words: words, usage: usage})
	}
	chunk := func(choices string) string {
		return fmt.Sprintf(`{"id":"chatcmpl-ledger","object":"chat.completion.chunk","model":%q,"choices":[%s]%s}`, lf.model.name, choices, usageNull)
	}
	event(chunk(`{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}`), 0, false)
	for _, d := range lf.deltas {
		event(chunk(fmt.Sprintf(`{"index":0,"delta":{"content":%q},"finish_reason":null}`, " "+lf.words(d))), int64(d), false)
	}
	event(chunk(`{"index":0,"delta":{},"finish_reason":"stop"}`), 0, false)
	ends := 1
	if lf.kind == lkDuplicateEnd {
		ends = 2
	}
	for range ends {
		if withUsage {
			event(fmt.Sprintf(`{"id":"chatcmpl-ledger","object":"chat.completion.chunk","model":%q,"choices":[],"usage":%s}`, lf.model.name, lf.usageJSON()), 0, true)
		}
		event("[DONE]", 0, false)
	}
	return b.String()
}

// inputEstimate is the documented estimate of the prompt. Chat
// completions: 3 tokens a message, 1 for its role, its content's tokens,
// and 3 to prime the reply. Messages: 3 a message (the system prompt
// too) and its content's tokens.
func (lf *ledgerLife) inputEstimate() int64 {
	if lf.anthropic {
		var n int64
		for _, words := range lf.messages {
			n += 3 + int64(words)
		}
		return n
	}
	n := int64(3)
	for _, words := range lf.messages {
		n += 3 + 1 + int64(words)
	}
	return n
}

// ledgerCharge is what a settlement books.
type ledgerCharge struct {
	basis                 string
	input, cached, output int64
}

func (c ledgerCharge) tokens() int64 { return c.input + c.output }

// expected works out the settlement from what happened, by the
// documented rules: the provider's usage when the server saw it; nothing
// for a refusal; for a stream without usage of which some body was seen,
// the input estimate and the output seen; and the whole reservation (the
// estimate and the output cap, or the output seen if more — of a cut JSON
// body, its generated text once its string is whole) where what was
// generated cannot be seen.
func (lf *ledgerLife) expected() ledgerCharge {
	in := lf.inputEstimate()
	reserved := func(observed int64) ledgerCharge {
		return ledgerCharge{basis: "reserved", input: in, output: max(lf.outputCap, observed)}
	}
	usage := ledgerCharge{basis: "usage", input: lf.prompt, cached: lf.cached, output: lf.completion}
	switch lf.kind {
	case lkUpstreamError:
		return ledgerCharge{basis: "refused"}
	case lkGoneBeforeHeaders:
		return reserved(0)
	case lkGoneAfterHeaders:
		// Streamed or not, none of the body was seen.
		return reserved(0)
	case lkCut:
		seen := 0
		for _, c := range lf.chunks[:lf.cutAfter] {
			seen += len(c)
		}
		if !lf.stream {
			var text int64
			if seen >= lf.textEnd {
				text = lf.textWords
			}
			return reserved(text)
		}
		return lf.fromEvents(seen, in, usage)
	}
	if !lf.stream {
		return usage
	}
	return lf.fromEvents(math.MaxInt, in, usage)
}

// fromEvents settles a stream of which the server saw the first seen
// bytes: an event counts once its blank line is in. After Anthropic's
// message_start, its usage is the report: the input it gives, and the
// output seen if more than its running count of 1, up to the cap.
func (lf *ledgerLife) fromEvents(seen int, in int64, usage ledgerCharge) ledgerCharge {
	var words int64
	started := false
	for _, ev := range lf.events {
		if ev.end > seen {
			break
		}
		if ev.usage {
			return usage
		}
		started = started || ev.start
		words += ev.words
	}
	if started {
		// The provider stops at the cap, which bounds the output seen.
		usage.output = min(lf.outputCap, max(1, words))
		return usage
	}
	return ledgerCharge{basis: "estimate", input: in, output: words}
}

// messagesUsage is Anthropic's usage object with output tokens out: the
// input not read from the cache, and what was.
func (lf *ledgerLife) messagesUsage(out int64) string {
	return fmt.Sprintf(`{"input_tokens":%d,"cache_creation_input_tokens":0,"cache_read_input_tokens":%d,"output_tokens":%d}`,
		lf.prompt-lf.cached, lf.cached, out)
}

func (lf *ledgerLife) messagesJSON() string {
	total := 0
	for _, d := range lf.deltas {
		total += d
	}
	head := fmt.Sprintf(`{"id":"msg_ledger","type":"message","role":"assistant","model":%q,"content":[{"type":"text","text":%q`,
		lf.model.name, lf.words(total))
	lf.textEnd, lf.textWords = len(head), int64(total)
	return head + `}],"stop_reason":"end_turn","stop_sequence":null,"usage":` + lf.messagesUsage(lf.completion) + "}"
}

// messagesSSE is a Messages stream: message_start (usage with 1 output
// token), a text block of the deltas, message_delta (the final usage),
// message_stop; lkDuplicateEnd repeats the last two.
func (lf *ledgerLife) messagesSSE() string {
	var b strings.Builder
	event := func(name, data string, ev ledgerEvent) {
		b.WriteString("event: " + name + "\ndata: " + data + "\n\n")
		ev.end = b.Len()
		lf.events = append(lf.events, ev)
	}
	event("message_start", fmt.Sprintf(`{"type":"message_start","message":{"id":"msg_ledger","type":"message","role":"assistant","model":%q,"content":[],"stop_reason":null,"usage":%s}}`,
		lf.model.name, lf.messagesUsage(1)), ledgerEvent{start: true})
	event("content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`, ledgerEvent{})
	for _, d := range lf.deltas {
		event("content_block_delta", fmt.Sprintf(`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":%q}}`, " "+lf.words(d)),
			ledgerEvent{words: int64(d)})
	}
	event("content_block_stop", `{"type":"content_block_stop","index":0}`, ledgerEvent{})
	ends := 1
	if lf.kind == lkDuplicateEnd {
		ends = 2
	}
	for range ends {
		event("message_delta", fmt.Sprintf(`{"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":%d}}`, lf.completion),
			ledgerEvent{usage: true})
		event("message_stop", `{"type":"message_stop"}`, ledgerEvent{})
	}
	return b.String()
}
