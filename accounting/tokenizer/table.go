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
// expected number of token boundaries between them, learned from text
// tokenised by OpenAI's tokenizers (see gen_test.go, which writes the
// file). It is stored compressed and unpacked on first use.
//
//go:embed approx.bin
var approxBin []byte

// Fixed-point units of the tables: weights are in 1/weightOne tokens, so
// that the hot loop adds small integers instead of floats.
const (
	weightOne = 1024
	// runFlag marks a pair of identical bytes that starts a run (of
	// spaces, tabs, dashes, …): runs tokenise far more cheaply than their
	// pairs suggest and are charged by length instead, off the hot path.
	runFlag = 1 << 15
	// maxRun is the longest run with a learned cost; longer runs add a
	// per-byte rate on top.
	maxRun = 33
)

// approxMagic identifies the table file format.
const approxMagic = "tokenwarden approx v1\n"

// profile is one tokenizer family's approximation tables.
type profile struct {
	name string
	// pairs[b0 | b1<<8] is the weight of byte b1 following byte b0
	// (little-endian, so that one 16-bit load of the text indexes it),
	// with runFlag set on pairs that start a run.
	pairs [65536]uint16
	// runs[c][L-2] is the cost of a run of L (2..maxRun) bytes c, and
	// runRate[c] the cost of each byte beyond maxRun.
	runs    [256][maxRun - 1]uint32
	runRate [256]uint32
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
// change after loading; the sync.Once only defers the ~1 ms of unpacking
// (and 400 KB of memory) to the first estimate.
var profiles = sync.OnceValues(func() (map[string]*profile, error) {
	return decodeProfiles(approxBin)
})

// decodeProfiles reads a table file: the magic line, then for each
// profile its name (a length byte and the bytes), the pair weights
// (uint16), the run costs and the run rates (uint32), little-endian, all
// deflate-compressed.
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
		err := readAll(r, name, p.pairs[:], p.runs[:], p.runRate[:])
		if err != nil {
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
	return out, nil
}

func readAll(r io.Reader, name []byte, pairs []uint16, runs [][maxRun - 1]uint32, rates []uint32) error {
	if _, err := io.ReadFull(r, name); err != nil {
		return err
	}
	if err := binary.Read(r, binary.LittleEndian, pairs); err != nil {
		return err
	}
	if err := binary.Read(r, binary.LittleEndian, runs); err != nil {
		return err
	}
	return binary.Read(r, binary.LittleEndian, rates)
}

// encodeProfiles writes profiles in the format decodeProfiles reads.
func encodeProfiles(ps ...*profile) ([]byte, error) {
	var buf bytes.Buffer
	w, err := flate.NewWriter(&buf, flate.BestCompression)
	if err != nil {
		return nil, err
	}
	if _, err := io.WriteString(w, approxMagic); err != nil {
		return nil, err
	}
	for _, p := range ps {
		w.Write([]byte{byte(len(p.name))})
		io.WriteString(w, p.name)
		for _, v := range []any{p.pairs[:], p.runs[:], p.runRate[:]} {
			if err := binary.Write(w, binary.LittleEndian, v); err != nil {
				return nil, err
			}
		}
	}
	if err := w.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// maxProfile returns a profile whose every weight is the larger of a's and
// b's.
func maxProfile(name string, a, b *profile) *profile {
	p := &profile{name: name}
	for i := range p.pairs {
		p.pairs[i] = max(a.pairs[i]&^runFlag, b.pairs[i]&^runFlag) | (a.pairs[i]|b.pairs[i])&runFlag
	}
	for c := range p.runs {
		for l := range p.runs[c] {
			p.runs[c][l] = max(a.runs[c][l], b.runs[c][l])
		}
		p.runRate[c] = max(a.runRate[c], b.runRate[c])
	}
	return p
}
