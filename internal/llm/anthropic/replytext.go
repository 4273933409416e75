package anthropic

import "github.com/tidwall/gjson"

// ReplyText reads the generated text of a whole Messages reply, which a
// reply without a usage report is charged by: the content blocks' text,
// the thinking the reply shows, and the input the model wrote for a tool
// (as JSON, as the stream's input_json_delta carries it). Redacted
// thinking is encrypted, not text, and is skipped as in the stream.
func ReplyText(reply gjson.Result, emit func(string)) {
	reply.Get("content").ForEach(func(_, block gjson.Result) bool {
		switch block.Get("type").Str {
		case "text":
			emit(block.Get("text").Str)
		case "thinking":
			emit(block.Get("thinking").Str)
		case "tool_use", "server_tool_use":
			emit(block.Get("input").Raw)
		}
		return true
	})
}
