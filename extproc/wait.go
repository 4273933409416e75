package extproc

import (
	"errors"
	"time"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/tokenwarden/tokenwarden/accounting"
)

// A request refused by limits that let it wait (on_exhausted.wait_up_to;
// see accounting.Limiter.ReserveWaiting) is held on the message it was
// decided on, unanswered. Envoy gives the server message_timeout to
// answer each message (1 s in the shipped configs) and answers 504 when
// it passes, so before holding the request the server sends a
// ProcessingResponse with only override_message_timeout set: Envoy
// restarts that message's timer with the wait plus
// accounting.WaitMargin. Envoy honours that only up to the filter's
// max_message_timeout, and only once per message; a longer override is
// ignored (counted in Envoy's override_message_timeout_ignored stat) and
// message_timeout runs on. So the filter must set max_message_timeout to
// at least the longest wait plus the margin: the shipped configs set
// 11 s, for accounting.MaxWaitUpTo.
//
// A client that disconnects while its request is held cancels the
// stream's context, which ends the wait at once: nothing is reserved.

// errNoStream is hold's error for a stream that cannot send (a test's
// stream without a gRPC stream behind it): the request is not held.
var errNoStream = errors.New("extproc: no stream to extend the message timeout on")

// hold extends Envoy's timeout for the message being answered to cover a
// wait of upTo, and notes when the wait began.
func (st *stream) hold(upTo time.Duration) error {
	st.heldAt = time.Now()
	if st.out == nil {
		return errNoStream
	}
	return st.out.Send(&extprocv3.ProcessingResponse{
		OverrideMessageTimeout: durationpb.New(upTo + accounting.WaitMargin),
	})
}

// waitMetadata adds how long res's request was held, if it was.
func waitMetadata(md *dynamicMetadata, res *accounting.Reservation) {
	if res.Wait.Outcome != "" {
		md.num(MetaWaitSeconds, res.Wait.Took.Seconds())
	}
}
