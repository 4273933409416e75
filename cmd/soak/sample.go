package main

import (
	"bufio"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tokenwarden/tokenwarden/accounting/redisstore"
)

// series is one sample of tokenwarden's /metrics.
type series struct {
	name   string
	labels map[string]string
	value  float64
}

// metrics is one scrape of /metrics.
type metrics []series

// labelPair matches one name="value" of a series' labels.
var labelPair = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"`)

// parseMetrics reads the Prometheus text format: comments skipped, each
// other line "name{labels} value".
func parseMetrics(r io.Reader) (metrics, error) {
	var m metrics
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' {
			continue
		}
		s := series{labels: map[string]string{}}
		rest := line
		if i := strings.IndexByte(line, '{'); i >= 0 {
			j := strings.LastIndexByte(line, '}')
			if j < i {
				return nil, fmt.Errorf("metrics: unbalanced braces in %q", line)
			}
			s.name = line[:i]
			for _, p := range labelPair.FindAllStringSubmatch(line[i+1:j], -1) {
				s.labels[p[1]] = p[2]
			}
			rest = line[j+1:]
		} else {
			name, r, ok := strings.Cut(line, " ")
			if !ok {
				return nil, fmt.Errorf("metrics: no value in %q", line)
			}
			s.name, rest = name, r
		}
		f := strings.Fields(rest)
		if len(f) == 0 {
			return nil, fmt.Errorf("metrics: no value in %q", line)
		}
		v, err := strconv.ParseFloat(f[0], 64)
		if err != nil {
			return nil, fmt.Errorf("metrics: %q: %w", line, err)
		}
		s.value = v
		m = append(m, s)
	}
	return m, sc.Err()
}

// sum adds the values of the series called name whose labels include
// every label=value pair of match.
func (m metrics) sum(name string, match ...string) float64 {
	var n float64
next:
	for _, s := range m {
		if s.name != name {
			continue
		}
		for i := 0; i+1 < len(match); i += 2 {
			if s.labels[match[i]] != match[i+1] {
				continue next
			}
		}
		n += s.value
	}
	return n
}

// byLabel returns the sums of the series called name by the value of
// their label.
func (m metrics) byLabel(name, label string) map[string]float64 {
	out := map[string]float64{}
	for _, s := range m {
		if s.name == name {
			out[s.labels[label]] += s.value
		}
	}
	return out
}

// scrape reads tokenwarden's /metrics at its admin address.
func scrape(adminAddr string) (metrics, error) {
	resp, err := admin.Get("http://" + adminAddr + "/metrics")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		return nil, fmt.Errorf("/metrics: status %d", resp.StatusCode)
	}
	return parseMetrics(resp.Body)
}

// redisStats are Redis's memory and key count.
type redisStats struct {
	usedMemory int64 // INFO memory used_memory
	keys       int64 // DBSIZE
}

func readRedis(ctx context.Context, rdb *redis.Client) (redisStats, error) {
	info, err := rdb.Info(ctx, "memory").Result()
	if err != nil {
		return redisStats{}, err
	}
	var st redisStats
	found := false
	for line := range strings.Lines(info) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "used_memory:"); ok {
			st.usedMemory, err = strconv.ParseInt(v, 10, 64)
			if err != nil {
				return redisStats{}, fmt.Errorf("INFO used_memory: %w", err)
			}
			found = true
		}
	}
	if !found {
		return redisStats{}, fmt.Errorf("INFO memory: no used_memory")
	}
	st.keys, err = rdb.DBSize(ctx).Result()
	return st, err
}

// records counts the reservation records in Redis: live ones (a
// reservation admitted and not yet settled: its value is the time it was
// written) and tombstones (a release that found nothing to refund; they
// expire after an hour).
func records(ctx context.Context, rdb *redis.Client) (live, tombstones int64, err error) {
	iter := rdb.Scan(ctx, 0, redisstore.RecordKeyPrefix+"*", 1000).Iterator()
	for iter.Next(ctx) {
		v, err := rdb.Get(ctx, iter.Val()).Bytes()
		if err == redis.Nil {
			continue // expired or settled meanwhile
		}
		if err != nil {
			return 0, 0, err
		}
		if len(v) == 8 && math.Float64frombits(binary.LittleEndian.Uint64(v)) <= 0 {
			tombstones++
		} else {
			live++
		}
	}
	return live, tombstones, iter.Err()
}

// row is one line of the soak's table.
type row struct {
	elapsed     time.Duration
	rps         float64
	counts      [numClasses]int64
	p50, p99    time.Duration
	heap        float64 // go_memstats_heap_inuse_bytes
	goroutines  float64 // go_goroutines
	twRSS       int64
	envoyRSS    int64
	redis       redisStats
	load        [3]string
	streamsOpen float64
}

// takeRow samples the processes and Redis for a row that closes iv, an
// interval of length d.
func takeRow(ctx context.Context, st *stack, elapsed, d time.Duration, iv interval) (row, error) {
	r := row{elapsed: elapsed, counts: iv.counts, p50: iv.percentile(50), p99: iv.percentile(99)}
	if d > 0 {
		r.rps = float64(iv.total()) / d.Seconds()
	}
	m, err := scrape(st.twAdmin)
	if err != nil {
		return row{}, fmt.Errorf("tokenwarden: %w", err)
	}
	r.heap, r.goroutines = m.sum("go_memstats_heap_inuse_bytes"), m.sum("go_goroutines")
	r.streamsOpen = m.sum("tokenwarden_streams_open")
	if r.twRSS, err = rssBytes(st.tokenwarden.pid()); err != nil {
		return row{}, err
	}
	if r.envoyRSS, err = rssBytes(st.envoy.pid()); err != nil {
		return row{}, err
	}
	if r.redis, err = readRedis(ctx, st.rdb); err != nil {
		return row{}, fmt.Errorf("redis: %w", err)
	}
	r.load, _ = loadAverage() // not Linux: the column stays empty
	return r, nil
}

const mib = 1 << 20

// tableHeader is the markdown header of the rows.
const tableHeader = `| elapsed | req/s | ok | 429 | 5xx | cancel | other | p50 ms | p99 ms | heap MiB | goroutines | tw RSS MiB | Envoy RSS MiB | Redis MiB | Redis keys | load1 |
|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|`

func (r row) String() string {
	ms := func(d time.Duration) string {
		return strconv.FormatFloat(float64(d)/float64(time.Millisecond), 'f', 1, 64)
	}
	mb := func(n float64) string { return strconv.FormatFloat(n/mib, 'f', 1, 64) }
	return fmt.Sprintf("| %s | %.1f | %d | %d | %d | %d | %d | %s | %s | %s | %.0f | %s | %s | %s | %d | %s |",
		fmtElapsed(r.elapsed), r.rps, r.counts[classOK], r.counts[classLimited], r.counts[class5xx], r.counts[classCancelled], r.counts[classOther],
		ms(r.p50), ms(r.p99), mb(r.heap), r.goroutines, mb(float64(r.twRSS)), mb(float64(r.envoyRSS)),
		mb(float64(r.redis.usedMemory)), r.redis.keys, r.load[0])
}

// fmtElapsed prints minutes:seconds.
func fmtElapsed(d time.Duration) string {
	d = d.Round(time.Second)
	return fmt.Sprintf("%d:%02d", int(d/time.Minute), int(d%time.Minute/time.Second))
}
