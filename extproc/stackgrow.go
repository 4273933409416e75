package extproc

// The goroutine that serves a stream is grpc-go's, started for the
// stream with the runtime's smallest stack, 2 KiB, which grpc's own work
// grows to 8 KiB before Process runs. Deciding on a request body goes
// deeper than that: the body's check and parse (a checker of a few
// kilobytes, nested walks over messages) take the stack past 8 KiB, and
// the runtime then copies the whole stack, a couple of dozen frames each
// adjusted through their pointer maps, to one of 16 KiB. That copy was
// about a tenth of a lifecycle's instructions.
//
// growStack makes the runtime grow the stack at the start of the stream
// instead, when grpc's few frames are all it holds, by asking for a frame
// larger than what is left: the stack grows straight to the size that
// fits it (16 KiB), in one cheap copy, and the decision later runs
// without one. A stream whose request is never decided pays the cheap
// copy for nothing; the one it saves a metered request costs several
// times more. The stack is the one the decision would have grown anyway,
// and the garbage collector shrinks it again while the stream waits for
// its response.

// stackReserve is the frame growStack asks for: with what grpc-go holds
// below Process (under 2 KiB) and the runtime's guard, more than an
// 8 KiB stack has and less than a 16 KiB one.
const stackReserve = 8 << 10

// growStack grows the calling goroutine's stack to 16 KiB, if it is
// smaller, and returns a byte that depends on i so that the compiler
// keeps its frame.
//
//go:noinline
func growStack(i int) byte {
	var frame [stackReserve]byte
	frame[i%stackReserve] = 1
	return frame[(i+1)%stackReserve]
}
