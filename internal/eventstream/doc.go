// Package eventstream decodes AWS event streams
// (application/vnd.amazon.eventstream), the binary framing of Bedrock's
// ConverseStream and InvokeModelWithResponseStream responses, push-style:
// bytes go in as ext_proc hands them over, split anywhere, and each
// complete, checksum-verified message comes out through a callback.
//
// A message is framed as
//
//	total_len u32 BE | headers_len u32 BE | prelude_crc u32 |
//	headers | payload | message_crc u32
//
// with CRC32 (IEEE) over the 8-byte prelude and over everything before the
// message CRC. A header is name_len u8, name, type u8, value; strings and
// byte arrays carry a u16 length, the other types a fixed size.
//
// The AWS SDK's eventstream.Decoder reads from an io.Reader and blocks for
// the rest of a frame, which would need a goroutine per response here; this
// decoder instead keeps its position between Writes.
//
// # Bounds
//
// A frame longer than Options.MaxMessageBytes (16 MiB by default, the
// protocol's limit) or with headers over 128 KiB, a bad checksum or
// malformed headers put the decoder in a sticky error state: it stops
// parsing (the framing cannot be trusted past that point) but never panics,
// and Write keeps accepting bytes. Payloads are kept up to
// Options.MaxPayloadBytes (1 MiB by default); a larger payload is still
// checksummed and delivered with Truncated set, so memory stays bounded
// while the stream stays in sync.
package eventstream
