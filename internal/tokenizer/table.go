package tokenizer

import (
	"bytes"
	"compress/flate"
	_ "embed"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sync"
)

// The approximation's model is data: for every pair of adjacent bytes, the
// expected number of token starts between them, learned from text
// tokenised by OpenAI's tokenizers (gen_test.go writes the file). It is
// stored compressed and unpacked on first use.
//
//go:embed approx.bin
var approxBin []byte

// weightOne is the fixed-point unit of the tables: weights are in
// 1/weightOne tokens, so that the hot loop adds small integers.
const weightOne = 1024

// approxMagic identifies the table file format.
const approxMagic = "tokenwarden approx v2\n"

// profile is one tokenizer family's approximation tables.
type profile struct {
	name string
	// pairs[b0 | b1<<8] is the weight of byte b1 following byte b0
	// (little-endian, so that one 16-bit load of the text indexes it).
	pairs [65536]uint16
	// runStart is the cost of a run of two or more spaces or tabs, on
	// top of its pairs' weights. Such a run is one token whatever its
	// length (indentation, alignment), which no pair weight can say: a
	// pair inside it would weigh 1/length.
	runStart uint16
	// wide is what count adds up: pairs widened, plus runPair for each
	// pair of equal bytes that can run (see isRunByte). widen fills it
	// once the pairs are final.
	wide [65536]uint32
}

// runPair marks a pair that may be part of a run in wide. It is above the
// sum of sixteen pair weights (16 × 0xffff < 1<<20), so that sixteen
// pairs' sum keeps their weights below it and the count of run pairs
// above.
const runPair = 1 << 20

// widen fills p.wide from p.pairs.
func (p *profile) widen() {
	for i, w := range p.pairs {
		p.wide[i] = uint32(w)
		if b0, b1 := byte(i), byte(i>>8); b0 == b1 && isRunByte(b0) {
			p.wide[i] += runPair
		}
	}
}

// Profile names. A model whose tokenizer is known uses that tokenizer's
// profile; any other model uses the generic one, which is the larger of
// the two weights everywhere and so is conservative for both.
const (
	profileO200k   = "o200k"
	profileCl100k  = "cl100k"
	profileGeneric = "generic"
)

// profiles unpacks the embedded tables once per process. The tables never
// change after loading; the sync.Once only defers the unpacking (about a
// millisecond and 1.2 MB) to the first estimate.
var profiles = sync.OnceValues(func() (map[string]*profile, error) {
	return decodeProfiles(approxBin)
})

// decodeProfiles reads a table file: the magic line, then for each
// profile its name (a length byte and the bytes), the pair weights and
// the run-start cost (uint16, little-endian), all deflate-compressed.
func decodeProfiles(data []byte) (map[string]*profile, error) {
	r := flate.NewReader(bytes.NewReader(data))
	defer r.Close()
	magic := make([]byte, len(approxMagic))
	if _, err := io.ReadFull(r, magic); err != nil || string(magic) != approxMagic {
		return nil, errors.New("approximation tables: bad header")
	}
	out := map[string]*profile{}
	for {
		var n [1]byte
		if _, err := io.ReadFull(r, n[:]); err == io.EOF {
			break
		} else if err != nil {
			return nil, fmt.Errorf("approximation tables: %w", err)
		}
		name := make([]byte, n[0])
		p := &profile{}
		if _, err := io.ReadFull(r, name); err != nil {
			return nil, fmt.Errorf("approximation tables: %w", err)
		}
		if err := binary.Read(r, binary.LittleEndian, p.pairs[:]); err != nil {
			return nil, fmt.Errorf("approximation tables: profile %q: %w", name, err)
		}
		if err := binary.Read(r, binary.LittleEndian, &p.runStart); err != nil {
			return nil, fmt.Errorf("approximation tables: profile %q: %w", name, err)
		}
		p.name = string(name)
		out[p.name] = p
	}
	o, c := out[profileO200k], out[profileCl100k]
	if o == nil || c == nil {
		return nil, errors.New("approximation tables: profiles missing")
	}
	out[profileGeneric] = maxProfile(profileGeneric, o, c)
	for _, p := range out {
		p.widen()
	}
	return out, nil
}

// encodeProfiles writes profiles in the format decodeProfiles reads.
func encodeProfiles(ps ...*profile) ([]byte, error) {
	var buf bytes.Buffer
	w, err := flate.NewWriter(&buf, flate.BestCompression)
	if err != nil {
		return nil, err
	}
	io.WriteString(w, approxMagic)
	for _, p := range ps {
		w.Write([]byte{byte(len(p.name))})
		io.WriteString(w, p.name)
		binary.Write(w, binary.LittleEndian, p.pairs[:])
		binary.Write(w, binary.LittleEndian, p.runStart)
	}
	if err := w.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// maxProfile returns a profile whose every weight is the larger of a's and
// b's.
func maxProfile(name string, a, b *profile) *profile {
	p := &profile{name: name, runStart: max(a.runStart, b.runStart)}
	for i := range p.pairs {
		p.pairs[i] = max(a.pairs[i], b.pairs[i])
	}
	return p
}
