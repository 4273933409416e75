package tokenizer

import "bytes"

// File inputs (PDFs) are billed as each page's extracted text plus an
// image of the page: up to FilePageTokens a page (a full page of text,
// about 1,000 tokens, plus a page image at high detail, 1,445 on gpt-4o).
const FilePageTokens = 2500

// UnknownFileTokens is charged for a file the request only names (a
// file_id): its content is not in the body. It is the cost of a
// four-page PDF.
const UnknownFileTokens = 4 * FilePageTokens

// FileTokens estimates a file part from its decoded content: a PDF by
// its page count (counted from its page objects, or one page per 50 KB
// when they are compressed away), anything else as text by counter. An
// empty data (a file_id) costs UnknownFileTokens.
func FileTokens(counter interface {
	CountTokens(model, text string) int64
}, model string, data []byte) int64 {
	if len(data) == 0 {
		return UnknownFileTokens
	}
	if bytes.HasPrefix(data, []byte("%PDF-")) {
		pages := pdfPages(data)
		if pages == 0 {
			pages = max(1, int64(len(data)/(50<<10)))
		}
		return pages * FilePageTokens
	}
	return counter.CountTokens(model, string(data))
}

// pdfPages counts "/Type /Page" objects (not "/Pages").
func pdfPages(b []byte) int64 {
	var n int64
	for {
		i := bytes.Index(b, []byte("/Type"))
		if i < 0 {
			return n
		}
		b = b[i+5:]
		j := 0
		for j < len(b) && (b[j] == ' ' || b[j] == '\r' || b[j] == '\n' || b[j] == '\t') {
			j++
		}
		if bytes.HasPrefix(b[j:], []byte("/Page")) && (len(b) == j+5 || b[j+5] != 's') {
			n++
		}
	}
}
