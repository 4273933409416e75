package main

import (
	"log/slog"
	"net/http"
)

// geminiEmbedRequest holds what fakellm reads of an embedContent request,
// and batchEmbedContents' requests, one such each.
type geminiEmbedRequest struct {
	Requests []struct{} `json:"requests"`
}

// serveGeminiEmbed answers POST /v1beta/models/{model}:embedContent and
// :batchEmbedContents as the Gemini API does: the embeddings, and no
// usage (Vertex AI's usageMetadata is not the Gemini API's).
func serveGeminiEmbed(log *slog.Logger, w http.ResponseWriter, r *http.Request, model string, batch bool) {
	ctl, body, ok := readRequest(w, r, geminiError)
	if !ok {
		return
	}
	var req geminiEmbedRequest
	if !decodeBody(w, body, &req, geminiError) {
		return
	}
	setSeen(w.Header(), model, nil)
	u := ctl.plan(len(body), 0)
	u.output = 0
	name := "gemini.embed_content"
	if ctl.status != 0 {
		logRequest(log, r, name, model, false, ctl.status, u)
		geminiError(w, ctl.status, errorMessage(ctl.status))
		return
	}
	logRequest(log, r, name, model, false, http.StatusOK, u)
	embedding := map[string]any{"values": []float64{-0.0073854364, 0.0019302598, 0.014196627, -0.07107486}}
	if !batch {
		writeJSON(w, ctl, http.StatusOK, map[string]any{"embedding": embedding})
		return
	}
	embeddings := make([]any, len(req.Requests))
	for i := range embeddings {
		embeddings[i] = embedding
	}
	writeJSON(w, ctl, http.StatusOK, map[string]any{"embeddings": embeddings})
}
