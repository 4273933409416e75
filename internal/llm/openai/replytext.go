package openai

import "github.com/tidwall/gjson"

// The generated text of a whole JSON reply, which a reply without a
// usage report is charged by: the same parts a stream's deltas carry,
// read from the reply's own shape.

// ChatReplyText reads choices[].message: content, reasoning, refusal and
// tool-call arguments.
func ChatReplyText(reply gjson.Result, emit func(string)) {
	choicesText(reply.Get("choices"), "message", emit)
}

// CompletionsReplyText reads choices[].text.
func CompletionsReplyText(reply gjson.Result, emit func(string)) {
	reply.Get("choices").ForEach(func(_, c gjson.Result) bool {
		emit(c.Get("text").Str)
		return true
	})
}

// ResponsesReplyText reads the output items: a message's output text and
// refusals, reasoning's summary and text, and the arguments or input of
// the calls the model writes (function, custom tool, MCP, the code
// interpreter's code): what the stream's text deltas carry.
func ResponsesReplyText(reply gjson.Result, emit func(string)) {
	reply.Get("output").ForEach(func(_, item gjson.Result) bool {
		switch item.Get("type").Str {
		case "message":
			item.Get("content").ForEach(func(_, part gjson.Result) bool {
				switch part.Get("type").Str {
				case "output_text":
					emit(part.Get("text").Str)
				case "refusal":
					emit(part.Get("refusal").Str)
				}
				return true
			})
		case "reasoning":
			for _, parts := range []string{"summary", "content"} {
				item.Get(parts).ForEach(func(_, part gjson.Result) bool {
					emit(part.Get("text").Str)
					return true
				})
			}
		case "function_call", "mcp_call":
			emit(item.Get("arguments").Str)
		case "custom_tool_call":
			emit(item.Get("input").Str)
		case "code_interpreter_call":
			emit(item.Get("code").Str)
		}
		return true
	})
}
