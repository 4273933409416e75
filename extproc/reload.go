package extproc

import "errors"

// Reload makes opts the options of the streams that start from now on.
// A stream reads the options once, when it starts, and runs on them to
// its end: a request admitted before a reload is settled as it was
// admitted, and one that starts after it is decided wholly under the new
// options (identity, estimation, limits, headers), never a mix.
//
// opts is checked as [NewServer] checks it; on an error nothing changes.
// opts.Limiter is required, on the same store as the current one: to
// change the limits and prices, pass the current Limiter's
// [accounting.Limiter.Reconfigure] result, which keeps settling what the
// old one reserved. Logger and Registerer are ignored: the server keeps
// the logger and the metrics it was made with (collectors are registered
// once); the learned output estimates are kept when opts.LearnedOutput
// asks for the same estimator. The observability-mode warning is logged again, once, after a
// reload.
//
// Reload is safe to call concurrently with streams and with itself (the
// last call wins). The gRPC server options ([Server.ServerOptions]) and
// the registration ([Register]) are the Server's and do not change.
func (s *Server) Reload(opts Options) error {
	if err := opts.check(); err != nil {
		return err
	}
	if opts.Limiter.Store() != s.opts.Limiter.Store() {
		return errors.New("extproc: Reload cannot change the limiter's store")
	}
	opts.Logger, opts.Registerer = s.log, nil
	next, err := newServer(opts, s.m, s.lm, s.bb, s.current().learned)
	if err != nil {
		return err
	}
	s.live.Store(next)
	return nil
}

// current returns the Server new streams run on: the last one Reload
// made, or s.
func (s *Server) current() *Server {
	if c := s.live.Load(); c != nil {
		return c
	}
	return s
}
