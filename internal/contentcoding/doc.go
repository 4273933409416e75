// Package contentcoding decodes compressed HTTP response bodies (gzip,
// deflate, br, zstd) push-style, in one pass, so that usage can be read
// from a response that Envoy passes through compressed.
//
// ext_proc hands a response body over one chunk at a time and wants an
// answer for each before the next; the client gets the compressed bytes
// untouched, and only tokenwarden's copy is decoded. The decompressors
// (klauspost/compress, andybalholm/brotli) are pull-style io.Readers, so
// each Decoder runs its decompressor as a coroutine (iter.Pull): Write
// hands it the chunk and resumes it until it has consumed every byte and
// asks for more. Decoded bytes reach the sink during Write, on the
// caller's goroutine in effect (the coroutine runs only while Write or
// Close waits for it), so the sink needs no locking and never runs after
// Close. No byte is decompressed twice: the work is O(n) over the stream.
//
// Memory is bounded by the format (a 32 KiB deflate window, at most 16 MiB
// for brotli, an 8 MiB zstd window) plus a 32 KiB output buffer. The
// decompressors and buffers are pooled across responses, so a steady
// stream of compressed responses does not allocate them again and again. Output is
// bounded by maxOut: a decompression bomb stops at maxOut bytes with
// ErrTooLarge, after which the decoder ignores its input.
//
// Close must be called for every Decoder, also for an abandoned response:
// it ends the coroutine, which would otherwise stay parked for the life of
// the process.
package contentcoding
