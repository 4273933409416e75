package bedrock

import "github.com/tidwall/gjson"

// ReplyText reads the generated text of a whole Converse reply, which a
// reply without a usage report is charged by: output.message.content's
// text, reasoning text and tool-use input (as JSON, as the stream's
// toolUse deltas carry it).
func ReplyText(reply gjson.Result, emit func(string)) {
	reply.Get("output.message.content").ForEach(func(_, block gjson.Result) bool {
		emit(block.Get("text").Str)
		emit(block.Get("reasoningContent.reasoningText.text").Str)
		if input := block.Get("toolUse.input"); input.Exists() {
			emit(input.Raw)
		}
		return true
	})
}
