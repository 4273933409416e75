package bodybudget

import (
	"bufio"
	"bytes"
	"io/fs"
	"math"
	"os"
	"path"
	"runtime/debug"
	"strconv"
	"strings"
)

// Where the memory a process is given comes from, as [Memory] reports.
const (
	SourceCgroup   = "cgroup"     // the cgroup's memory limit (v2 memory.max, v1 memory.limit_in_bytes)
	SourceGoLimit  = "gomemlimit" // the Go runtime's memory limit (GOMEMLIMIT, or debug.SetMemoryLimit)
	SourceFallback = "fallback"   // neither: FallbackMemory
)

// FallbackMemory is the memory a process given no limit is sized for: a
// machine without limits may still be shared, and a budget that assumes
// all of its memory would let a burst take it.
const FallbackMemory = 1 << 30

// Memory returns the memory the process is given, and where the figure
// comes from: the least of its cgroup's memory limit and the Go runtime's
// memory limit, or FallbackMemory when neither is set.
func Memory() (int64, string) {
	return memoryOf(os.DirFS("/"), debug.SetMemoryLimit(-1))
}

// CgroupLimit returns the memory limit of the process's cgroup (v2 or
// v1), and false when it has none (or none can be read).
func CgroupLimit() (int64, bool) {
	return cgroupLimit(os.DirFS("/"))
}

// memoryOf is Memory with the file system (rooted at /) and the Go
// runtime's memory limit (math.MaxInt64 when unset) given.
func memoryOf(fsys fs.FS, goLimit int64) (int64, string) {
	cg, ok := cgroupLimit(fsys)
	switch {
	case goLimit < math.MaxInt64 && (!ok || goLimit <= cg):
		return goLimit, SourceGoLimit
	case ok:
		return cg, SourceCgroup
	}
	return FallbackMemory, SourceFallback
}

// unlimited is the least figure read as no limit: cgroup v1 reports
// none as the largest page-aligned int64.
const unlimited = 1 << 62

// cgroupLimit reads the memory limit of the cgroup /proc/self/cgroup
// names: cgroup v2's memory.max, or v1's memory.limit_in_bytes, under
// the cgroup's path or, in a container whose cgroup namespace makes its
// own cgroup the root, at the root of the hierarchy.
func cgroupLimit(fsys fs.FS) (int64, bool) {
	self, err := fs.ReadFile(fsys, "proc/self/cgroup")
	if err != nil {
		return 0, false
	}
	sc := bufio.NewScanner(bytes.NewReader(self))
	for sc.Scan() {
		// hierarchy-ID:controller-list:cgroup-path
		id, rest, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		controllers, cgroup, ok := strings.Cut(rest, ":")
		if !ok {
			continue
		}
		var files []string
		switch {
		case id == "0" && controllers == "":
			files = []string{path.Join("sys/fs/cgroup", cgroup, "memory.max"), "sys/fs/cgroup/memory.max"}
		case hasController(controllers, "memory"):
			files = []string{path.Join("sys/fs/cgroup/memory", cgroup, "memory.limit_in_bytes"), "sys/fs/cgroup/memory/memory.limit_in_bytes"}
		default:
			continue
		}
		for _, f := range files {
			if n, ok := readLimit(fsys, f); ok {
				return n, n < unlimited
			}
		}
	}
	return 0, false
}

func hasController(list, name string) bool {
	for c := range strings.SplitSeq(list, ",") {
		if c == name {
			return true
		}
	}
	return false
}

// readLimit reads a cgroup memory limit file: a number of bytes, or
// "max" (v2's no limit, read as unlimited). ok is false when the file
// cannot be read or holds anything else.
func readLimit(fsys fs.FS, name string) (int64, bool) {
	b, err := fs.ReadFile(fsys, name)
	if err != nil {
		return 0, false
	}
	s := strings.TrimSpace(string(b))
	if s == "max" {
		return unlimited, true
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n <= 0 {
		return 0, false
	}
	return n, true
}
