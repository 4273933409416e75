package main

import (
	"log/slog"
	"os"
	"runtime/debug"

	"github.com/tokenwarden/tokenwarden/internal/bodybudget"
)

// goMemoryLimitPercent is the part of a cgroup's memory limit the Go
// runtime is told it may use when GOMEMLIMIT does not say: the rest is
// for what the runtime does not count (the binary, thread stacks) and
// for the collector to catch up.
const goMemoryLimitPercent = 90

// setGoMemoryLimit gives the Go runtime a memory limit below the
// cgroup's, when GOMEMLIMIT sets none. Without one the collector lets
// the heap grow to twice what is live before it runs, so garbage of
// request bodies already released could take the process past its
// cgroup's limit, where the kernel kills it; with one, it collects
// harder as the heap nears the limit. It returns the limit set, or 0.
func setGoMemoryLimit(log *slog.Logger) int64 {
	cgroup, ok := bodybudget.CgroupLimit()
	limit := goMemoryLimit(os.Getenv("GOMEMLIMIT"), cgroup, ok)
	if limit == 0 {
		return 0
	}
	debug.SetMemoryLimit(limit)
	log.Info("Go memory limit set from the cgroup's", "cgroup_limit_bytes", cgroup, "go_memory_limit_bytes", limit)
	return limit
}

// goMemoryLimit returns the Go memory limit to set, given GOMEMLIMIT and
// the cgroup's limit (ok: it has one): 0, to leave it, when GOMEMLIMIT
// is set (the operator's figure wins) or there is no cgroup limit.
func goMemoryLimit(env string, cgroup int64, ok bool) int64 {
	if env != "" || !ok {
		return 0
	}
	return cgroup / 100 * goMemoryLimitPercent
}
