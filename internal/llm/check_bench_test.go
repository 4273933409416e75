package llm

import (
	"strconv"
	"strings"
	"testing"

	"github.com/tidwall/gjson"
)

// benchBodies are bodies of about 1 MB of each shape that costs a check
// something different.
func benchBodies() map[string][]byte {
	var ids, keys strings.Builder
	for i := 0; ids.Len() < 1<<20; i++ {
		if i > 0 {
			ids.WriteByte(',')
		}
		ids.WriteString(strconv.Itoa(i % 100_000))
	}
	for i := 0; keys.Len() < 1<<20; i++ {
		if i > 0 {
			keys.WriteByte(',')
		}
		keys.WriteString(`"key` + strconv.Itoa(i) + `":` + strconv.Itoa(i))
	}
	var chat strings.Builder
	chat.WriteString(`{"model":"m","messages":[`)
	for i := 0; chat.Len() < 1<<20; i++ {
		if i > 0 {
			chat.WriteByte(',')
		}
		chat.WriteString(`{"role":"user","content":"What does the AMF do when a UE registers, and which messages does it exchange with the AUSF and the UDM?"}`)
	}
	chat.WriteString(`]}`)
	return map[string][]byte{
		// Many short messages: a long conversation, the usual large body.
		"chat":   []byte(chat.String()),
		"prompt": []byte(`{"model":"m","messages":[{"role":"user","content":"` + strings.Repeat("lorem ipsum ", 1<<20/12) + `"}],"max_tokens":5}`),
		"cjk":    []byte(`{"model":"m","messages":[{"role":"user","content":"` + strings.Repeat("漢字かな交じり文。", 1<<20/27) + `"}]}`),
		"escapes": []byte(`{"model":"m","messages":[{"role":"user","content":"` +
			strings.Repeat(`line\n\"quoted\" \u00e9 `, 1<<20/24) + `"}]}`),
		"token_ids":   []byte(`{"model":"m","prompt":[` + ids.String() + `]}`),
		"wide_object": []byte(`{"model":"m","metadata":{` + keys.String() + `}}`),
	}
}

// BenchmarkCheckBody measures the check on each shape, against gjson's
// validation, which it replaces.
func BenchmarkCheckBody(b *testing.B) {
	for name, body := range benchBodies() {
		b.Run(name, func(b *testing.B) {
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			for b.Loop() {
				if err := CheckBody(body, checkFields); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(name+"/gjson", func(b *testing.B) {
			b.SetBytes(int64(len(body)))
			for b.Loop() {
				if !gjson.ValidBytes(body) {
					b.Fatal("invalid")
				}
			}
		})
	}
}
