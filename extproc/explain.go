package extproc

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/tokenwarden/tokenwarden/accounting"
	"github.com/tokenwarden/tokenwarden/internal/llm"
)

// Explanation is how the server meters one request: what it reads from
// the body and what it reserves, part by part. It is the answer of
// [Server.Explain], for "tokenwarden estimate".
type Explanation struct {
	// API is the wire format the path routes to, e.g. "openai.chat"; ""
	// for a path that is not an LLM API.
	API string
	// Metered is false for a request the server counts as one request,
	// on the requests dimension only: a path that is not an LLM API, or a
	// request without a body. The rest is then empty.
	Metered bool
	// Passes: the path is not an LLM API's and such paths are not
	// counted (Options.CountOtherPaths off): the request passes
	// untouched, counted nowhere.
	Passes bool
	// Unmetered: the path is of the unmetered API family API, which the
	// options allow (Options.AllowUnmetered): the request is counted on
	// the requests dimension only.
	Unmetered bool
	// Model is the model the request is priced and its limits matched
	// as: the body's, the path's (Gemini, Bedrock), or the model an Azure
	// OpenAI deployment is configured to serve.
	Model string
	// FromDeployment reports that Model is an Azure deployment's: the
	// provider serves it whatever the body's "model" says.
	FromDeployment bool
	Stream         bool
	// Parts are the addends of InputTokens, in the order counted.
	Parts       []llm.Part
	InputTokens int64
	// OutputCap is the output cap per choice; CapSource says where it
	// came from: the request's field ("max_tokens"), or the default
	// ("default_output_cap"). Both are empty for an API without output.
	OutputCap int64
	CapSource string
	// CapInjected reports that the request sets no cap and the server
	// adds OutputCap to the body (estimation.inject_output_cap), so that
	// the reservation bounds what the provider generates.
	CapInjected bool
	Choices     int64
	// Estimate is what the server reserves: its Total on every tokens
	// limit, and its price (accounting.Price.EstimateCost) on every cost
	// limit.
	Estimate accounting.Estimate
	// Learned is what learned output estimates make of the output
	// reserved; nil when they are off, or the API has no output.
	Learned *LearnedExplanation
	// Notes say what the estimate could not see, and how the request is
	// settled when its response reports no usage.
	Notes []string
}

// RefusedError is the reply the server sends instead of metering a
// request: its HTTP status and its message, as the client reads it in
// the API's error shape.
type RefusedError struct {
	Status  int
	Message string
}

func (e *RefusedError) Error() string { return strconv.Itoa(e.Status) + " " + e.Message }

// Explain reads a request body sent to path as the server reads it — the
// same routing, the same wire format, the same options, the same parse
// as the decision on a request's body (see parse) — and says how the
// server meters it. A body the server refuses is a *RefusedError with
// the server's reply. Explain reserves nothing and counts nothing: no
// identity is read, no header either (a request is explained as sent
// without any), and no limit is consulted.
func (s *Server) Explain(path string, body []byte) (*Explanation, error) {
	s = s.current()
	t := s.classify(path)
	if f := t.family; f != nil && f.needsAnthropicVersion {
		// Explained as sent without headers: not the family's.
		t = target{other: true}
	}
	if f := t.family; f != nil {
		if !s.opts.AllowUnmetered[f.name] {
			return nil, &RefusedError{Status: llm.Forbidden.Status(), Message: familyRefusal(f)}
		}
		return &Explanation{API: f.name, Unmetered: true}, nil
	}
	if t.api == nil {
		return &Explanation{Passes: t.other && !s.opts.CountOtherPaths}, nil
	}
	e := &Explanation{API: t.api.Name()}
	if len(body) == 0 {
		// Envoy sends no body, and the server meters none.
		return e, nil
	}
	if len(body) > maxRequestBody {
		return nil, refused("request body too large")
	}
	req, err := s.parse(t, path, body, func(p llm.Part) { e.Parts = append(e.Parts, p) })
	if err != nil {
		return nil, refused(err.Error())
	}
	o := &s.opts
	e.Metered = true
	e.Model, e.FromDeployment, e.Stream = req.Model, t.model != "", req.Stream
	e.InputTokens, e.OutputCap, e.CapSource, e.Choices = req.InputTokens, req.OutputCap, req.CapSource, req.Choices
	e.CapInjected = o.InjectOutputCap && !req.CapGiven
	e.Learned, e.Estimate = s.explainLearned(&req, t.api.Name(), req.Estimate())
	if req.Notes != "" {
		e.Notes = strings.Split(req.Notes, "; ")
	}
	switch {
	case req.Background:
		e.Notes = append(e.Notes, "background: the reply carries no usage, so the request is charged its whole reservation")
	case req.HiddenReasoning || s.hiddenReasoning(req.Model):
		e.Notes = append(e.Notes, "the model reasons without streaming all of it: a response that reports no usage is charged its whole reservation")
	}
	return e, nil
}

// refused is the RefusedError of a 400 with msg.
func refused(msg string) *RefusedError {
	return &RefusedError{Status: llm.InvalidRequest.Status(), Message: msg}
}

// parse reads a metered request's body as the server meters it: the
// wire format t routes to parses it with the server's options, the model
// an Azure deployment path names replaces the body's, and a background
// response is refused when the server is configured to. The decision on
// a request's body and Explain both call it, so that the estimate
// explained is the one reserved. explain receives the parts of the input
// estimate (nil on the server's path, where it costs nothing). An
// error's text is the message of the server's 400.
func (s *Server) parse(t target, path string, body []byte, explain func(llm.Part)) (llm.Request, error) {
	o := &s.opts
	req, err := t.api.ParseRequest(path, body, llm.ParseOptions{
		Counter: o.Counter, DefaultOutputCap: o.DefaultOutputCap, Model: t.model, Explain: explain})
	if err != nil {
		return req, fmt.Errorf("Invalid request: %w", err)
	}
	switch {
	case t.model != "":
		// The path names the model (an Azure deployment): the provider
		// serves that one, whatever the body says.
		req.Model = t.model
	case t.azureBody:
		// Azure's v1 API names the deployment in the body's "model".
		if m, ok := o.AzureDeployments[req.Model]; ok {
			req.Model = m
		}
	}
	if len(req.Model) > MaxAttributeBytes {
		// The model is an attribute, used verbatim in the store keys of
		// limits scoped by it, as identity values are, and bounded alike:
		// a fresh huge name per request would be a huge counter each.
		return req, errors.New("Invalid request: the model name is longer than " + strconv.Itoa(MaxAttributeBytes) + " bytes")
	}
	if req.Background && o.RefuseBackground {
		return req, errors.New("Invalid request: background responses are not allowed here: their usage cannot be metered")
	}
	return req, nil
}
