// Package config reads tokenwarden's config file: one YAML document whose
// keys configure the server binary and the libraries it is built from.
// [Load] and [Parse] return it as a [Config] that holds those libraries'
// own option structs, validated; tokenwarden's check-config and its
// server use nothing else.
//
// It is public so that an embedder who builds a binary of their own
// (with its own gRPC server, metrics or store) reads the same file the
// same way:
//
//	cfg, err := config.Load("tokenwarden.yaml")
//	// …
//	var store accounting.Store = memstore.New(memstore.Options{})
//	if cfg.Store.Redis != nil {
//		store, err = redisstore.New(*cfg.Store.Redis)
//	}
//	acc := cfg.Accounting
//	acc.Store = store
//	limiter, err := accounting.New(acc)
//	so := cfg.Server
//	so.Limiter = limiter
//	srv, err := extproc.NewServer(so)
//	gs := grpc.NewServer(srv.ServerOptions()...)
//	health := extproc.Register(gs, srv)
//
// # The file
//
// Each top-level key maps to one place in Config:
//
//	listen, admin, shutdown_grace,   Config's own fields, with DefaultListen,
//	admin_pprof, log                 DefaultAdmin and DefaultShutdownGrace
//	store.type, store.redis          Store.Redis, a redisstore.Options (nil for
//	                                 the memory store); store.redis.allow_eviction
//	                                 is Store.AllowEviction
//	identity                         Server.Identity (extproc.Identity)
//	other_paths                      Server.CountOtherPaths (count)
//	unmetered_apis                   Server.AllowUnmetered (the families set to
//	                                 allow)
//	estimation                       Tokenizer (tokenizer, chars_per_token,
//	                                 per_model, exact_max_bytes, default_image),
//	                                 from which Server.Counter is built; and
//	                                 Server's DefaultOutputCap, InjectOutputCap,
//	                                 InjectStreamUsage
//	models                           Accounting.Prices (USD per 1M tokens)
//	limits                           Accounting.Limits (cost limits in USD,
//	                                 windows as Go durations, Nd, day or month)
//	regions                          Regions: the region's regions.Options and
//	                                 the ledger's redisstore.Options
//	limits[].across_regions          Limit.AcrossRegions (needs regions)
//	request_bytes                    Server.RequestBytes (sizes in bytes, with
//	                                 GOMEMLIMIT's units)
//	settlement, azure,               Server's HiddenReasoningModels,
//	strip_accept_encoding            RefuseBackground, ContextWindows,
//	                                 AzureDeployments, StripAcceptEncoding
//
// A key the file leaves out leaves the library option at its zero value,
// which each library documents as its default (extproc.DefaultOutputCap,
// redisstore.DefaultTimeout, …), so that a default is written in one
// place; inject_output_cap and inject_stream_usage are on unless set to
// false, and on_store_error is allow for a requests limit and deny
// otherwise.
//
// # Errors
//
// Reading is strict: a key the file format does not have, a key given
// twice, a value of the wrong shape or type, is a problem, named by its
// path (limits[2].windw). Each library validates its own options
// (accounting.Options.Validate, extproc.Options.Validate,
// redisstore.Options.Validate, the tokenizer's) and names each problem by
// its key, which Parse moves to where the options sit in the file
// (store.redis.hash_tag); the package itself checks only what is about
// the file: its shape, its own settings, and that every attribute a
// limit names has a source. Parse reports every problem, sorted by field,
// in an [*Error]; a problem that only follows from another (a limit of an
// unknown dimension has no amount in a known unit) is left out.
//
// The example config that tokenwarden runs on without -config belongs to
// the binary (cmd/tokenwarden), not here: it is a demonstration, not a
// default an embedder should inherit.
package config
