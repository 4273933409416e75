package extproc

import (
	"strings"

	"github.com/tokenwarden/tokenwarden/internal/llm"
	"github.com/tokenwarden/tokenwarden/internal/llm/anthropic"
	"github.com/tokenwarden/tokenwarden/internal/llm/bedrock"
	"github.com/tokenwarden/tokenwarden/internal/llm/gemini"
	"github.com/tokenwarden/tokenwarden/internal/llm/openai"
)

// route maps request paths to an API. Adding an API is one wire format
// package and one row here.
type route struct {
	// suffix matches the end of the cleaned path (see llm.CleanPath), so
	// that gateways that mount an API under a prefix
	// (/openai/deployments/x/chat/completions) are metered too.
	suffix string
	// match, when set, is used instead of suffix: the model sits inside
	// the path, and the wire format reads it from the raw path itself.
	match func(rawPath string) bool
	api   llm.API
}

// routes is the path → API table, tried in order (a longer suffix before
// a shorter one it ends with). It is never modified.
var routes = []route{
	{suffix: "/chat/completions", api: openai.Chat{}},
	{suffix: "/completions", api: openai.Completions{}},
	{suffix: "/embeddings", api: openai.Embeddings{}},
	{suffix: "/responses", api: openai.Responses{}},
	// Not just "/messages": OpenAI Assistants' /threads/{id}/messages is
	// not an LLM call.
	{suffix: "/v1/messages", api: anthropic.Messages{}},
	{match: gemini.MatchPath, api: gemini.GenerateContent{}},
	{match: gemini.MatchEmbedPath, api: gemini.EmbedContent{}},
	{match: bedrock.MatchPath, api: bedrock.Converse{}},
}

// target is what a request path asks for.
type target struct {
	// api is the LLM API called, or nil for a path that is only counted
	// as a request.
	api llm.API
	// model is the model the path names when the provider takes it from
	// there rather than from the body (an Azure OpenAI deployment, mapped
	// by Options.AzureDeployments), or "".
	model string
	// azureBody: an Azure OpenAI path whose body's "model" names the
	// deployment (the v1 API, /openai/v1/…), mapped the same way.
	azureBody bool
	// family is the unmetered path family the path belongs to (see
	// families.go), or nil: refused, or counted as a request.
	family *family
	// other: no LLM path family matched; the request passes untouched
	// unless Options.CountOtherPaths. Only classify's last return sets
	// it, so that a target of any family, metered or refused, never
	// passes for want of a field.
	other bool
}

// azurePrefix starts the deployment segment of an Azure OpenAI path:
// /openai/deployments/{deployment}/chat/completions?api-version=…
const azurePrefix = "/openai/deployments/"

// azureAPIs are the APIs an Azure OpenAI deployment serves, by what
// follows the deployment segment.
var azureAPIs = map[string]llm.API{
	"/chat/completions":            openai.Chat{},
	"/extensions/chat/completions": openai.Chat{}, // "on your data"
	"/completions":                 openai.Completions{},
	"/embeddings":                  openai.Embeddings{},
}

// classify returns what a raw :path asks for. Every decision is taken on
// the path as llm.CleanPath decodes it — the way the upstream's router
// will see it — so that no spelling of a metered path (percent-escapes,
// dot segments, repeated slashes) reaches the upstream as an LLM call
// while tokenwarden counts it as something else.
func (s *Server) classify(rawPath string) target {
	p := llm.CleanPath(rawPath)
	if t, ok := s.azure(p); ok {
		return t
	}
	for i := range routes {
		r := &routes[i]
		if r.match != nil {
			if r.match(rawPath) {
				return target{api: r.api}
			}
			continue
		}
		if strings.HasSuffix(p, r.suffix) {
			// Azure's v1 API (/openai/v1/chat/completions, and
			// /openai/responses) takes the deployment from the body.
			return target{api: r.api, azureBody: strings.Contains(p, "/openai/")}
		}
	}
	if f := matchFamily(p); f != nil {
		return target{family: f}
	}
	return target{other: true}
}

// name is the target's api attribute: its API's name, its unmetered
// family's, or "other".
func (t *target) name() string {
	switch {
	case t.api != nil:
		return t.api.Name()
	case t.family != nil:
		return t.family.name
	}
	return "other"
}

// shape is the error shape of the target's replies: its API's, its
// unmetered family's, or nil (OpenAI's, see immediate).
func (t *target) shape() errorShape {
	switch {
	case t.api != nil:
		return t.api
	case t.family != nil:
		return t.family.shape
	}
	return nil
}

// azure classifies an Azure OpenAI deployment path. Azure serves the
// deployment's model whatever the body's "model" says, so the deployment
// decides the price and the model-matched limits: the model configured
// for it in Options.AzureDeployments, or its own name.
func (s *Server) azure(p string) (target, bool) {
	i := strings.Index(p, azurePrefix)
	if i < 0 {
		return target{}, false
	}
	rest := p[i+len(azurePrefix):]
	j := strings.IndexByte(rest, '/')
	if j <= 0 {
		return target{}, false
	}
	api, ok := azureAPIs[rest[j:]]
	if !ok {
		return target{}, false
	}
	deployment := rest[:j]
	model, ok := s.opts.AzureDeployments[deployment]
	if !ok {
		model = deployment
	}
	return target{api: api, model: model}, true
}
