package extproc

import (
	"errors"
	"io"
	"log/slog"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/tokenwarden/tokenwarden/accounting"
	"github.com/tokenwarden/tokenwarden/accounting/tokenizer"
)

// Options configure a Server. Limiter is required.
type Options struct {
	Limiter  *accounting.Limiter
	Identity Identity
	// Counter counts the tokens of request text and of streamed output;
	// nil means the calibrated approximation (tokenizer.New's default).
	Counter accounting.TokenCounter
	// DefaultOutputCap is the output cap of a request that names none;
	// zero means 4096.
	DefaultOutputCap int64
	// InjectOutputCap adds the API's output-cap field to requests that
	// have none, so the reservation bounds the spend.
	InjectOutputCap bool
	// InjectStreamUsage asks OpenAI-style streams to report usage.
	InjectStreamUsage bool
	// StripAcceptEncoding removes accept-encoding from metered requests,
	// so providers answer uncompressed and the server reads usage without
	// decompressing. Compressed responses are read either way.
	StripAcceptEncoding bool
	// MaxBuffer bounds what a usage reader keeps of a response (a JSON
	// body, one SSE event); zero means 4 MiB.
	MaxBuffer  int
	Logger     *slog.Logger
	Registerer prometheus.Registerer
}

// Server implements Envoy's ExternalProcessor service.
type Server struct {
	extprocv3.UnimplementedExternalProcessorServer

	opts Options
	log  *slog.Logger
	m    *metrics
}

// NewServer returns a Server.
func NewServer(opts Options) (*Server, error) {
	if opts.Limiter == nil {
		return nil, errors.New("extproc: no limiter")
	}
	if opts.Counter == nil {
		c, err := tokenizer.New(tokenizer.Config{})
		if err != nil {
			return nil, err
		}
		opts.Counter = c
	}
	if opts.DefaultOutputCap <= 0 {
		opts.DefaultOutputCap = 4096
	}
	if opts.MaxBuffer <= 0 {
		opts.MaxBuffer = 4 << 20
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Server{opts: opts, log: log, m: newMetrics(opts.Registerer)}, nil
}

// Process handles one HTTP request's stream. Envoy sends messages in
// order and needs exactly one reply to each, in order; STREAMED body
// chunks arrive pipelined, and answering them one by one in arrival order
// meets that.
func (s *Server) Process(srv extprocv3.ExternalProcessor_ProcessServer) error {
	s.m.streams.Inc()
	defer s.m.streams.Dec()
	st := newStream(s, srv.Context())
	// Whatever ends the stream, an admitted request settles: a cancelled
	// stream is how Envoy reports a client that went away.
	defer st.finish()
	for {
		req, err := srv.Recv()
		if err != nil {
			if errors.Is(err, io.EOF) || status.Code(err) == codes.Canceled {
				return nil
			}
			return err
		}
		resp, last := st.handle(req)
		if resp == nil {
			return status.Error(codes.InvalidArgument, "unexpected ext_proc message")
		}
		if err := srv.Send(resp); err != nil {
			if errors.Is(err, io.EOF) || status.Code(err) == codes.Canceled {
				return nil
			}
			return err
		}
		if last {
			// Envoy closes the stream after an immediate response.
			return nil
		}
	}
}

// MaxMessageBytes is the largest gRPC message the server accepts. The
// default of 4 MiB would turn a large buffered request body into an
// ext_proc error, and Envoy into a 500; bodies beyond Envoy's own buffer
// limit never reach the server (Envoy answers 413).
const MaxMessageBytes = 64 << 20

// GRPCServerOptions are the options a grpc.Server hosting this service
// needs.
func GRPCServerOptions() []grpc.ServerOption {
	return []grpc.ServerOption{
		grpc.MaxRecvMsgSize(MaxMessageBytes),
		grpc.MaxSendMsgSize(MaxMessageBytes),
		// Stop waits for handlers, so that streams cut by shutdown still
		// settle before the process exits.
		grpc.WaitForHandlers(true),
	}
}
