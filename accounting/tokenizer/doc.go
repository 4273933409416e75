// Package tokenizer estimates token counts.
package tokenizer
