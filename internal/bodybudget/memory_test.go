package bodybudget

import (
	"math"
	"testing"
	"testing/fstest"
)

func TestMemoryOf(t *testing.T) {
	const gib = 1 << 30
	v2 := func(cgroup, max string) fstest.MapFS {
		fs := fstest.MapFS{"proc/self/cgroup": {Data: []byte("0::" + cgroup + "\n")}}
		if max != "" {
			fs["sys/fs/cgroup"+cgroup+"/memory.max"] = &fstest.MapFile{Data: []byte(max + "\n")}
		}
		return fs
	}
	v1 := func(limit string) fstest.MapFS {
		return fstest.MapFS{
			"proc/self/cgroup": {Data: []byte("12:pids:/kubepods/pod1\n4:memory:/kubepods/pod1/c1\n1:name=systemd:/kubepods/pod1\n")},
			"sys/fs/cgroup/memory/kubepods/pod1/c1/memory.limit_in_bytes": {Data: []byte(limit + "\n")},
		}
	}
	noLimit := int64(math.MaxInt64)
	for _, tc := range []struct {
		name       string
		fs         fstest.MapFS
		goLimit    int64
		want       int64
		wantSource string
	}{
		{"cgroup v2 limit", v2("/kubepods/pod1/c1", "1073741824"), noLimit, gib, SourceCgroup},
		{"cgroup v2 at a namespaced root", fstest.MapFS{
			"proc/self/cgroup":         {Data: []byte("0::/\n")},
			"sys/fs/cgroup/memory.max": {Data: []byte("536870912\n")},
		}, noLimit, gib / 2, SourceCgroup},
		{"cgroup v2 path not mounted: the root's file", fstest.MapFS{
			"proc/self/cgroup":         {Data: []byte("0::/elsewhere\n")},
			"sys/fs/cgroup/memory.max": {Data: []byte("536870912\n")},
		}, noLimit, gib / 2, SourceCgroup},
		{"cgroup v2 max is no limit", v2("/c", "max"), noLimit, FallbackMemory, SourceFallback},
		{"cgroup v1 limit", v1("2147483648"), noLimit, 2 * gib, SourceCgroup},
		{"cgroup v1 unlimited", v1("9223372036854771712"), noLimit, FallbackMemory, SourceFallback},
		{"GOMEMLIMIT below the cgroup's", v2("/c", "1073741824"), 900 << 20, 900 << 20, SourceGoLimit},
		{"GOMEMLIMIT above the cgroup's", v2("/c", "1073741824"), 2 * gib, gib, SourceCgroup},
		{"GOMEMLIMIT alone", fstest.MapFS{}, 3 * gib, 3 * gib, SourceGoLimit},
		{"nothing readable", fstest.MapFS{}, noLimit, FallbackMemory, SourceFallback},
		{"garbage in the file", v2("/c", "lots"), noLimit, FallbackMemory, SourceFallback},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, source := memoryOf(tc.fs, tc.goLimit)
			if got != tc.want || source != tc.wantSource {
				t.Errorf("got %d from %s, want %d from %s", got, source, tc.want, tc.wantSource)
			}
		})
	}
}

// TestDefault: the budget leaves a quarter of the memory to everything
// else and divides the rest by the copies a body in flight costs; one
// principal holds a quarter of it.
func TestDefault(t *testing.T) {
	total, share := Default(1200 << 20)
	if total != 300<<20 || share != 75<<20 {
		t.Errorf("got %d and %d, want %d and %d", total, share, 300<<20, 75<<20)
	}
}
