package bodybudget

// Copies is how many copies of a body in flight the process may hold at
// once: on arrival, gRPC's receive buffers, the message they make up and
// the decoded body; on release, the decoded body, the edited one and the
// reply's encoding. BENCHMARKS.md ("Request bodies in memory") has the
// heap profiles behind the figure.
const Copies = 3

// Default returns the budget of a process given memory bytes: the bytes
// of request bodies in flight, and one principal's share of them. Their
// copies (Copies of each) may take three quarters of the memory, the
// rest being for everything else (the runtime, the limiter's state, the
// open streams' response readers, the collector's headroom); one
// principal may hold a quarter of the budget.
func Default(memory int64) (total, share int64) {
	total = memory / 4 * 3 / Copies
	return total, total / 4
}
