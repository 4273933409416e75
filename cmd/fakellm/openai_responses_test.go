package main

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
)

const responsesPath = "/v1/responses"

// TestResponsesJSON covers non-streaming Responses API answers.
func TestResponsesJSON(t *testing.T) {
	srv := newTestServer(t)
	cases := []struct {
		name       string
		body       string
		output     string // x-fakellm-output-tokens
		wantOutput int
		wantStatus string
	}{
		{"completed", `{"model":"gpt-4o-mini","input":"hi"}`, "12", 12, "completed"},
		{"cap reached exactly", `{"model":"gpt-4o-mini","input":"hi","max_output_tokens":16}`, "16", 16, "completed"},
		{"incomplete", `{"model":"gpt-4o-mini","input":"hi","max_output_tokens":16}`, "40", 16, "incomplete"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := call(t, srv, responsesPath, c.body, map[string]string{hdrInputTokens: "30", hdrCachedTokens: "10", hdrOutputTokens: c.output})
			if r.status != 200 {
				t.Fatalf("status got %d: %s", r.status, r.body)
			}
			m := decodeJSON(t, r.body)
			if m["object"] != "response" || m["status"] != c.wantStatus {
				t.Errorf("object %v status %v, want response / %s", m["object"], m["status"], c.wantStatus)
			}
			if got := num(t, m, "usage", "output_tokens"); got != c.wantOutput {
				t.Errorf("output_tokens got %d, want %d", got, c.wantOutput)
			}
			if num(t, m, "usage", "input_tokens") != 30 || num(t, m, "usage", "input_tokens_details", "cached_tokens") != 10 ||
				num(t, m, "usage", "total_tokens") != 30+c.wantOutput {
				t.Errorf("usage got %v, want input 30 (10 cached), total %d", m["usage"], 30+c.wantOutput)
			}
		})
	}
}

// TestResponsesStream checks the named events, their sequence numbers and the
// usage in the terminal event.
func TestResponsesStream(t *testing.T) {
	srv := newTestServer(t)
	cases := []struct {
		name, body, output string
		wantTerminal       string
		wantOutput         int
	}{
		{"completed", `{"model":"m","input":"x","stream":true}`, "8", "response.completed", 8},
		{"incomplete", `{"model":"m","input":"x","stream":true,"max_output_tokens":20}`, "30", "response.incomplete", 20},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := call(t, srv, responsesPath, c.body, map[string]string{hdrInputTokens: "5", hdrOutputTokens: c.output, hdrChunks: "2"})
			evs := parseSSE(t, r.body)
			var names []string
			for i, ev := range evs {
				names = append(names, ev.name)
				var m map[string]any
				if err := json.Unmarshal([]byte(ev.data), &m); err != nil {
					t.Fatal(err)
				}
				if m["type"] != ev.name {
					t.Errorf("event %s: data type %v, want the event name", ev.name, m["type"])
				}
				if num(t, m, "sequence_number") != i {
					t.Errorf("event %d: sequence_number %v", i, m["sequence_number"])
				}
				if strings.HasPrefix(ev.name, "response.") && m["response"] != nil && i < len(evs)-1 {
					if u := m["response"].(map[string]any)["usage"]; u != nil {
						t.Errorf("event %s carries usage %v before the end", ev.name, u)
					}
				}
				if i == len(evs)-1 {
					if got := num(t, m, "response", "usage", "output_tokens"); got != c.wantOutput {
						t.Errorf("terminal usage output_tokens got %d, want %d", got, c.wantOutput)
					}
				}
			}
			want := []string{"response.created", "response.in_progress", "response.output_item.added", "response.content_part.added",
				"response.output_text.delta", "response.output_text.delta", "response.output_text.done",
				"response.content_part.done", "response.output_item.done", c.wantTerminal}
			if !slices.Equal(names, want) {
				t.Errorf("events got %v, want %v", names, want)
			}
			if strings.Contains(r.body, "[DONE]") {
				t.Error("Responses streams have no [DONE]")
			}
		})
	}
}

// TestResponsesErrors covers error replies, including the minimum output cap.
func TestResponsesErrors(t *testing.T) {
	srv := newTestServer(t)
	checkErrorStatus(t, srv, responsesPath, `{"model":"m"}`, true, func(t *testing.T, status int, m map[string]any) {
		if _, ok := m["error"].(map[string]any); !ok {
			t.Errorf("status %d: body %v, want OpenAI's error shape", status, m)
		}
	})
	for name, body := range map[string]string{
		"cap below 16": `{"model":"m","max_output_tokens":15}`,
		"no model":     `{"input":"x"}`,
		"bad JSON":     `[`,
	} {
		if r := call(t, srv, responsesPath, body, nil); r.status != 400 {
			t.Errorf("%s: status got %d, want 400", name, r.status)
		}
	}
}

// TestResponsesCut checks a cut stream never reaches the terminal event.
func TestResponsesCut(t *testing.T) {
	srv := newTestServer(t)
	r := call(t, srv, responsesPath, `{"model":"m","stream":true}`, map[string]string{hdrCutAfter: "2", hdrChunks: "4"})
	if r.readErr == nil {
		t.Fatal("body read cleanly, want the connection dropped")
	}
	if n := strings.Count(r.body, "event: response.output_text.delta"); n != 2 {
		t.Errorf("got %d deltas before the cut, want 2", n)
	}
	if strings.Contains(r.body, "response.completed") {
		t.Error("cut stream reached response.completed")
	}
}

// TestResponsesBackground covers "background": true: the reply is queued, with
// no output and usage null.
func TestResponsesBackground(t *testing.T) {
	srv := newTestServer(t)
	r := call(t, srv, responsesPath, `{"model":"o3","input":"think long","background":true}`, nil)
	if r.status != 200 {
		t.Fatalf("status got %d, want 200: %s", r.status, r.body)
	}
	m := decodeJSON(t, r.body)
	if m["status"] != "queued" || m["background"] != true {
		t.Errorf("status %v background %v, want queued and true", m["status"], m["background"])
	}
	if u, ok := m["usage"]; !ok || u != nil {
		t.Errorf("usage got %v (present %v), want null", u, ok)
	}
	if out, _ := m["output"].([]any); len(out) != 0 {
		t.Errorf("output got %v, want []", m["output"])
	}

	plain := decodeJSON(t, call(t, srv, responsesPath, `{"model":"o3","input":"hi"}`, nil).body)
	if plain["background"] != false || plain["status"] != "completed" {
		t.Errorf("without background: background %v status %v, want false and completed", plain["background"], plain["status"])
	}

	s := call(t, srv, responsesPath, `{"model":"o3","input":"hi","background":true,"stream":true}`, nil)
	evs := parseSSE(t, s.body)
	var created map[string]any
	if err := json.Unmarshal([]byte(evs[0].data), &created); err != nil {
		t.Fatal(err)
	}
	if st := created["response"].(map[string]any)["status"]; evs[0].name != "response.created" || st != "queued" {
		t.Errorf("first event %s with status %v, want response.created, queued", evs[0].name, st)
	}
	if last := evs[len(evs)-1].name; last != "response.completed" {
		t.Errorf("last event %s, want response.completed", last)
	}
}
