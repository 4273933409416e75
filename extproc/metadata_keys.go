package extproc

// MetadataNamespace is the dynamic-metadata namespace tokenwarden writes
// (estimate, decision, actual usage) for Envoy's access logs. Envoy keeps
// it only when listed in metadata_options.receiving_namespaces.
const MetadataNamespace = "tokenwarden"

// The keys tokenwarden writes in its metadata namespace, for Envoy's
// access logs (%DYNAMIC_METADATA(tokenwarden:KEY)%). They are an
// interface with whoever reads those logs: the shipped configs, the
// docs and the tests name them, so they are written here once.
const (
	// MetaDecision is "admitted", "rejected" or "downgraded".
	MetaDecision = "decision"
	// MetaLimit names the limit a rejection tripped, or the one whose
	// on_exhausted downgraded the request.
	MetaLimit = "limit"
	// MetaDowngradedFrom is the model a downgraded request named; its
	// MetaModel is the fallback's.
	MetaDowngradedFrom = "downgraded_from"
	// MetaReservation is the reservation's ID, as the settlement log
	// line names it.
	MetaReservation = "reservation"
	// MetaEstimateTokens and MetaEstimateCost are what was reserved
	// (cost in USD, six decimals).
	MetaEstimateTokens = "estimate_tokens"
	MetaEstimateCost   = "estimate_cost"
	// MetaAPI and MetaModel are the API kind and the model, as the
	// limits saw them.
	MetaAPI   = "api"
	MetaModel = "model"
	// MetaActualTokens, MetaActualInputTokens and MetaActualOutputTokens
	// are what the settlement booked.
	MetaActualTokens       = "actual_tokens"
	MetaActualInputTokens  = "actual_input_tokens"
	MetaActualOutputTokens = "actual_output_tokens"
	// MetaSettledOn is the settlement's Basis.
	MetaSettledOn = "settled_on"
	// MetaSettledCost is what the settlement booked on the cost
	// dimension (USD, six decimals), for a model with a price.
	MetaSettledCost = "settled_cost"
	// MetaShadowRejected names, comma-separated, the shadow limits
	// (mode: shadow) that would have rejected an admitted request; absent
	// when none would.
	MetaShadowRejected = "shadow_rejected"
	// MetaWaitSeconds is how long a request was held for capacity
	// (on_exhausted.wait_up_to) before it was admitted or refused;
	// absent when it was not held.
	MetaWaitSeconds = "wait_seconds"
)
