package extproc

import (
	"strings"

	"github.com/tokenwarden/tokenwarden/extproc/anthropic"
	"github.com/tokenwarden/tokenwarden/extproc/bedrock"
	"github.com/tokenwarden/tokenwarden/extproc/gemini"
	"github.com/tokenwarden/tokenwarden/extproc/llm"
	"github.com/tokenwarden/tokenwarden/extproc/openai"
)

// route maps request paths to an API. Adding an API is one wire format
// package and one row here.
type route struct {
	// suffix matches the end of the path (query and trailing slashes
	// removed), so that gateways that mount an API under a prefix
	// (/openai/deployments/x/chat/completions) are metered too.
	suffix string
	// match, when set, is used instead of suffix (the model sits inside
	// the path).
	match func(path string) bool
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
	{match: bedrock.MatchPath, api: bedrock.Converse{}},
}

// lookupAPI returns the API a path belongs to, or nil for a path that is
// only counted as a request.
func lookupAPI(path string) llm.API {
	p := path
	if i := strings.IndexByte(p, '?'); i >= 0 {
		p = p[:i]
	}
	p = strings.TrimRight(p, "/")
	for i := range routes {
		r := &routes[i]
		if r.match != nil {
			if r.match(p) {
				return r.api
			}
			continue
		}
		if strings.HasSuffix(p, r.suffix) {
			return r.api
		}
	}
	return nil
}
