package main

import (
	"os"
	"testing"
)

// TestChatBodyFixture: the chat body loadgen sends is the fixture the
// OpenAI parser's BenchmarkParseChat2KB parses, so that the benchmark
// measures the request the whole servers are compared on.
func TestChatBodyFixture(t *testing.T) {
	b, err := os.ReadFile("../../testdata/openai/chat_request_2k.json")
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != chatBody {
		t.Errorf("testdata/openai/chat_request_2k.json is not loadgen's chat body; write chatBody to it")
	}
}
