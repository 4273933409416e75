package extproc

import (
	"strings"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"

	"github.com/tokenwarden/tokenwarden/internal/llm"
	"github.com/tokenwarden/tokenwarden/internal/llm/anthropic"
	"github.com/tokenwarden/tokenwarden/internal/llm/bedrock"
	"github.com/tokenwarden/tokenwarden/internal/llm/gemini"
	"github.com/tokenwarden/tokenwarden/internal/llm/openai"
)

// Unmetered families. A provider serves more than the calls tokenwarden
// meters: batches over uploaded files, realtime sessions over a
// WebSocket, images, audio, fine-tuning, agents, cached contexts billed
// by the hour. Each spends on the provider's account in a way no body
// tokenwarden reads announces, so it cannot be reserved. Such a path is
// refused (403, in the provider's error shape) unless the operator
// allows its family (Options.AllowUnmetered, the config's
// unmetered_apis), and then it is counted on the requests dimension
// only, under the family's name as its api attribute, so that a limit
// can still bound how often it is called.

// errorShape renders tokenwarden's own replies in an API's error shape:
// an llm.API's, or an unmetered family's provider's.
type errorShape interface {
	RenderError(e llm.Error) llm.Reply
}

// family is one unmetered path family.
type family struct {
	// name is the family's api attribute, metrics label and key under
	// unmetered_apis.
	name string
	// match reports whether a cleaned path (llm.CleanPath), folded to
	// lower case, is the family's.
	match func(p string) bool
	// shape renders the refusal.
	shape errorShape
	// anthropicVersion: the family's paths are also Anthropic's
	// (/v1/files), which every Anthropic client calls with an
	// anthropic-version header: such a request is refused in
	// Anthropic's shape.
	anthropicVersion bool
	// needsAnthropicVersion: the family's paths are too common a name
	// (/v1/sessions) to be anything but Anthropic's when called with an
	// anthropic-version header, without which Anthropic refuses them.
	needsAnthropicVersion bool
}

// The providers' error shapes.
type (
	openaiShape    struct{}
	anthropicShape struct{}
	googleShape    struct{}
	awsShape       struct{}
)

func (openaiShape) RenderError(e llm.Error) llm.Reply    { return openai.RenderError(e) }
func (anthropicShape) RenderError(e llm.Error) llm.Reply { return anthropic.RenderError(e) }
func (googleShape) RenderError(e llm.Error) llm.Reply    { return gemini.RenderError(e) }
func (awsShape) RenderError(e llm.Error) llm.Reply       { return bedrock.RenderError(e) }

// families are the unmetered path families, tried in order after the
// metered routes (so that a metered call under a family's prefix stays
// metered). Never modified.
var families = []family{
	// OpenAI, and Azure OpenAI (/openai/…, /openai/deployments/{d}/…).
	{name: "openai.batches", match: openaiPath("batches"), shape: openaiShape{}},
	{name: "openai.files", match: openaiPath("files", "uploads"), shape: openaiShape{}, anthropicVersion: true},
	{name: "openai.realtime", match: openaiPath("realtime"), shape: openaiShape{}},
	{name: "openai.images", match: openaiPath("images"), shape: openaiShape{}},
	{name: "openai.audio", match: openaiPath("audio"), shape: openaiShape{}},
	{name: "openai.fine_tuning", match: openaiPath("fine_tuning", "fine-tunes"), shape: openaiShape{}},
	{name: "openai.assistants", match: openaiPath("assistants", "threads", "vector_stores"), shape: openaiShape{}},
	{name: "openai.videos", match: openaiPath("videos", "video"), shape: openaiShape{}},
	{name: "openai.evals", match: openaiPath("evals"), shape: openaiShape{}},
	{name: "openai.containers", match: openaiPath("containers"), shape: openaiShape{}},
	{name: "openai.chatkit", match: openaiPath("chatkit"), shape: openaiShape{}},
	// Anthropic.
	{name: "anthropic.batches", match: segmentsAfter("messages", "batches"), shape: anthropicShape{}},
	{name: "anthropic.complete", match: func(p string) bool { return strings.HasSuffix(p, "/v1/complete") }, shape: anthropicShape{}},
	{name: "anthropic.agents", match: segmentsAfter("v1", "agents", "sessions", "deployments", "deployment_runs", "environments", "dreams"),
		shape: anthropicShape{}, needsAnthropicVersion: true},
	// Google: the Gemini API and Vertex AI.
	{name: "gemini.batches", match: anyOf(methods("batchgeneratecontent", "asyncbatchembedcontent"),
		segmentsAfter("v1beta", "batches"), segmentsAfter("v1alpha", "batches"), hasSegment("batchpredictionjobs")), shape: googleShape{}},
	{name: "gemini.cached_contents", match: hasSegment("cachedcontents"), shape: googleShape{}},
	{name: "gemini.live", match: func(p string) bool { return strings.Contains(p, "bidigeneratecontent") }, shape: googleShape{}},
	{name: "vertex.predict", match: methods("predict", "predictlongrunning", "rawpredict", "streamrawpredict", "serverstreamingpredict",
		"streamingpredict", "streamingrawpredict", "directpredict", "directrawpredict", "fetchpredictoperation"), shape: googleShape{}},
	// Amazon Bedrock.
	{name: "bedrock.invoke_other", match: bedrockInvoke, shape: awsShape{}},
	{name: "bedrock.async_invoke", match: hasSegment("async-invoke"), shape: awsShape{}},
	{name: "bedrock.batch", match: anyOf(hasSegment("model-invocation-job"), hasSegment("model-invocation-jobs")), shape: awsShape{}},
	{name: "bedrock.agents", match: anyOf(hasSegment("agentaliases"), hasSegment("retrieveandgenerate"), hasSegment("retrieveandgeneratestream"),
		segmentsAfter("flows", "*")), shape: awsShape{}},
}

// unmeteredFamily decides a request on a path of family f, from its
// headers h: refused (the reply, and done) unless the options allow the
// family; an allowed one goes on to be counted as a request.
func (st *stream) unmeteredFamily(f *family, h *extprocv3.HttpHeaders) (*extprocv3.ProcessingResponse, bool) {
	_, anthropicVersion := headerValue(h, "anthropic-version")
	if f.needsAnthropicVersion && !anthropicVersion {
		// Not Anthropic's (which refuses it without the header): a
		// path of some other application.
		st.target = target{other: true}
		return nil, false
	}
	if st.s.opts.AllowUnmetered[f.name] {
		return nil, false
	}
	st.countAs(f.name, "refused")
	shape := f.shape
	if f.anthropicVersion && anthropicVersion {
		shape = anthropicShape{}
	}
	return refusedFamily(f, shape), true
}

// UnmeteredFamilies returns the names of the unmetered path families,
// the keys of Options.AllowUnmetered.
func UnmeteredFamilies() []string {
	names := make([]string, len(families))
	for i := range families {
		names[i] = families[i].name
	}
	return names
}

// matchFamily returns the family of cleaned path p, or nil.
func matchFamily(p string) *family {
	lower := foldPath(p)
	for i := range families {
		if families[i].match(lower) {
			return &families[i]
		}
	}
	return nil
}

// foldPath returns p in lower case, each segment without its ";"
// parameters: upstreams that fold case or drop parameters route these
// spellings as the family's plain path, so they are the family's too.
func foldPath(p string) string {
	if strings.IndexByte(p, ';') >= 0 {
		segs := strings.Split(p, "/")
		for i, s := range segs {
			segs[i], _, _ = strings.Cut(s, ";")
		}
		p = strings.Join(segs, "/")
	}
	return strings.ToLower(p)
}

// openaiRoots are the segments an OpenAI API's resources follow: /v1/…,
// Azure's /openai/… and its deployments' /openai/deployments/{d}/….
var openaiRoots = []string{"v1", "openai"}

// openaiPath matches a path whose segments hold an OpenAI root followed
// by one of names (…/v1/batches/…), or a deployment's segment followed
// by one (…/deployments/{d}/images/…).
func openaiPath(names ...string) func(string) bool {
	return func(p string) bool {
		for _, root := range openaiRoots {
			if segmentsAfter(root, names...)(p) {
				return true
			}
		}
		return segmentsAfter("deployments", prefixed("*", names)...)(p)
	}
}

// prefixed returns names, each behind first and a "/".
func prefixed(first string, names []string) []string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = first + "/" + n
	}
	return out
}

// segmentsAfter matches a path where segment root is followed by one of
// names, whole segments each ("a/b" names two; "*" is any one segment).
func segmentsAfter(root string, names ...string) func(string) bool {
	return func(p string) bool {
		for rest := p; ; {
			i := strings.Index(rest, "/"+root+"/")
			if i < 0 {
				return false
			}
			rest = rest[i+len(root)+1:]
			for _, n := range names {
				if segmentsPrefix(rest[1:], n) {
					return true
				}
			}
		}
	}
}

// segmentsPrefix reports whether path p begins with the segments of
// want ("*" matching any one), ending there or at a "/".
func segmentsPrefix(p, want string) bool {
	for seg := range strings.SplitSeq(want, "/") {
		head, tail, _ := strings.Cut(p, "/")
		if head == "" || (seg != "*" && head != seg) {
			return false
		}
		p = tail
	}
	return true
}

// hasSegment matches a path with the segment name anywhere (a segment
// named so, or one whose Google custom method is it: models/m:name).
func hasSegment(name string) func(string) bool {
	return func(p string) bool {
		for seg := range strings.SplitSeq(p, "/") {
			if seg == name {
				return true
			}
		}
		return false
	}
}

// methods matches a path whose last segment calls one of Google's
// custom methods (…/models/{m}:predict).
func methods(names ...string) func(string) bool {
	return func(p string) bool {
		last := p[strings.LastIndexByte(p, '/')+1:]
		i := strings.LastIndexByte(last, ':')
		if i < 0 {
			return false
		}
		for _, n := range names {
			if last[i+1:] == n {
				return true
			}
		}
		return false
	}
}

// anyOf matches a path any of ms matches.
func anyOf(ms ...func(string) bool) func(string) bool {
	return func(p string) bool {
		for _, m := range ms {
			if m(p) {
				return true
			}
		}
		return false
	}
}

// bedrockInvoke matches Bedrock's InvokeModel and
// InvokeModelWithResponseStream (/model/{id}/invoke,
// /model/{id}/invoke-with-response-stream) of the model families
// tokenwarden does not meter: those it meters take their route first.
func bedrockInvoke(p string) bool {
	return strings.Contains(p, "/model/") && (strings.HasSuffix(p, "/invoke") || strings.HasSuffix(p, "/invoke-with-response-stream"))
}
