package tokenizer

// Provider constants for what the wire formats cannot count as text:
// media in the request, and the prompts a provider adds on its own. They
// live here, with the image, audio and file formulas, so that every API
// that serves a model family (Claude through Anthropic's API and through
// Bedrock, say) charges it the same.
const (
	// ClaudeToolPromptTokens is the system prompt Anthropic adds when
	// tools are offered (documented as 313–346 tokens, depending on
	// tool_choice), on its own API and on Bedrock.
	ClaudeToolPromptTokens = 346
	// ClaudeImageTokens is the most one image costs on Claude: images are
	// scaled to about 1.15 megapixels, at 750 pixels per token. Bedrock's
	// other model families are charged at it too: the high side of the
	// rates it documents.
	ClaudeImageTokens = 1600
	// ClaudePDFBytesPerToken charges a base64 PDF by its decoded size.
	// Each page costs its text (1,500–3,000 tokens) plus an image of the
	// page, and text PDFs run at tens of KiB per page; counting the base64
	// as text (4 characters a token) would overcharge several-fold.
	ClaudePDFBytesPerToken = 10
	// GeminiMediaMinTokens is what Gemini charges for the smallest image
	// (or one PDF page, or one second of video).
	GeminiMediaMinTokens = 258
	// GeminiMediaTokensPerKiB charges Gemini's inline media by decoded
	// size: a 1024-px JPEG (~200 KiB) is four 258-token tiles; audio (32
	// tokens/s) and video (~263 tokens/s) run at a few tokens per KiB at
	// common bit rates.
	GeminiMediaTokensPerKiB = 5
)
