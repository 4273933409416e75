package sse

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// FuzzDecoder checks, for any input, that the decoder does not panic, that its memory
// stays bounded, that cutting the input into Writes changes nothing, and that it agrees
// with the spec-literal reference decoder. maxData 0 means the default bound; small
// values make truncation common.
func FuzzDecoder(f *testing.F) {
	files, err := filepath.Glob(filepath.Join("testdata", "*.sse"))
	if err != nil {
		f.Fatal(err)
	}
	for _, name := range files {
		b, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b, uint(len(b)/2), uint8(0))
		f.Add(b, uint(len(b)/3), uint8(64))
	}
	for _, s := range []string{
		"data: x\r\n\r\n", "data: x\r", "\xEF\xBB\xBFdata: x\n\n", "\xEF\xBBdata: x\n\n",
		"id: 1\x00\ndata\n\n", "event\ndata:  a\rdata:b\r\r", ":\n\n", "data: abcdefgh\n\n",
		// The single data line that dataEvent dispatches straight away,
		// and the lines next to it that it must leave alone.
		"event: t\ndata: x\n\ndata: y\n\n", "id: 7\ndata: x\n\ndata:y\n\n", "data:  x\n\n", "data:\n\n",
		"data: x\ndata: y\n\n", "data: x\r\n\n", "data: x\n\r\n", "data\n\n", "datum: x\n\n", "data: 0123456789\n\n",
	} {
		for k := range len(s) + 1 {
			f.Add([]byte(s), uint(k), uint8(3))
		}
	}
	f.Fuzz(func(t *testing.T, input []byte, split uint, maxData uint8) {
		opts := Options{MaxEventBytes: int(maxData)}
		whole := decode(t, opts, input)
		checkEvents(t, "reference decoder", whole, referenceDecode(input, opts.MaxEventBytes))

		k := int(split % uint(len(input)+1))
		checkEvents(t, "split at fuzz-chosen point", decode(t, opts, input[:k], input[k:]), whole)

		if len(input) <= 1<<12 {
			bytewise := make([][]byte, len(input))
			for i := range input {
				bytewise[i] = input[i : i+1]
			}
			if got := decode(t, opts, bytewise...); !slices.Equal(got, whole) {
				checkEvents(t, "1-byte writes", got, whole)
			}
		}
	})
}
