package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// startRedis starts a throwaway redis-server on a free loopback port,
// without persistence, and returns its URL and a function that stops it.
func startRedis(ctx context.Context, p pin) (url string, stop func(), err error) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return "", nil, errors.New("redis-server not found: install it, pass -redis URL, or leave redis out of -servers")
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	port := lis.Addr().(*net.TCPAddr).Port
	lis.Close()
	dir, err := os.MkdirTemp("", "loadgen-redis-")
	if err != nil {
		return "", nil, err
	}
	cmd := exec.Command(bin, "--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
		"--dir", dir, "--logfile", "")
	dieWithParent(cmd)
	if err := cmd.Start(); err != nil {
		os.RemoveAll(dir)
		return "", nil, err
	}
	stop = func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		os.RemoveAll(dir)
	}
	if err := p.apply(cmd.Process.Pid); err != nil {
		stop()
		return "", nil, err
	}
	url = fmt.Sprintf("redis://127.0.0.1:%d/0", port)
	c := redis.NewClient(&redis.Options{Addr: fmt.Sprintf("127.0.0.1:%d", port)})
	defer c.Close()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if err = c.Ping(ctx).Err(); err == nil {
			return url, stop, nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			stop()
			return "", nil, fmt.Errorf("redis-server did not answer: %w", err)
		}
	}
}

// redisStats are the figures of Redis's INFO that loadgen reports.
type redisStats struct {
	// cpu is used_cpu_user + used_cpu_sys: Redis's CPU time, all threads.
	cpu time.Duration
	// scriptCalls and scriptUsec sum the commandstats of every command
	// that runs a script (EVAL, EVALSHA, FCALL and their _RO forms).
	scriptCalls int64
	scriptUsec  int64
	// reads is total_reads_processed (INFO stats): the reads Redis made
	// on its clients' connections, a round trip's requests in each.
	reads int64
}

// callsPerRead is how many script calls came in each read Redis made:
// how many calls shared a round trip, on average.
func (a redisStats) callsPerRead() float64 {
	if a.reads == 0 {
		return 0
	}
	return float64(a.scriptCalls) / float64(a.reads)
}

func (a redisStats) sub(b redisStats) redisStats {
	return redisStats{cpu: a.cpu - b.cpu, scriptCalls: a.scriptCalls - b.scriptCalls, scriptUsec: a.scriptUsec - b.scriptUsec, reads: a.reads - b.reads}
}

// usecPerCall is the mean time Redis spent in one script call.
func (a redisStats) usecPerCall() float64 {
	if a.scriptCalls == 0 {
		return 0
	}
	return float64(a.scriptUsec) / float64(a.scriptCalls)
}

func readRedisStats(ctx context.Context, c *redis.Client) (redisStats, error) {
	info, err := c.Info(ctx, "cpu", "stats", "commandstats").Result()
	if err != nil {
		return redisStats{}, fmt.Errorf("redis INFO: %w", err)
	}
	return parseInfo(info)
}

// scriptCommands are the commandstats entries of commands that run Lua.
var scriptCommands = map[string]bool{
	"cmdstat_eval": true, "cmdstat_evalsha": true, "cmdstat_eval_ro": true, "cmdstat_evalsha_ro": true,
	"cmdstat_fcall": true, "cmdstat_fcall_ro": true,
}

// parseInfo reads INFO's "key:value" lines.
func parseInfo(info string) (redisStats, error) {
	var s redisStats
	var user, sys float64
	var seenCPU int
	sc := bufio.NewScanner(strings.NewReader(info))
	for sc.Scan() {
		k, v, ok := strings.Cut(strings.TrimSpace(sc.Text()), ":")
		if !ok {
			continue
		}
		switch {
		case k == "used_cpu_user" || k == "used_cpu_sys":
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				return s, fmt.Errorf("redis INFO %s: %w", k, err)
			}
			if k == "used_cpu_user" {
				user = f
			} else {
				sys = f
			}
			seenCPU++
		case k == "total_reads_processed":
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				return s, fmt.Errorf("redis INFO %s: %w", k, err)
			}
			s.reads = n
		case scriptCommands[k]:
			// calls=12,usec=345,usec_per_call=28.75,...
			for _, kv := range strings.Split(v, ",") {
				name, val, _ := strings.Cut(kv, "=")
				n, err := strconv.ParseInt(val, 10, 64)
				switch name {
				case "calls":
					s.scriptCalls += n
				case "usec":
					s.scriptUsec += n
				default:
					continue
				}
				if err != nil {
					return s, fmt.Errorf("redis INFO %s: %w", k, err)
				}
			}
		}
	}
	if seenCPU != 2 {
		return s, errors.New("redis INFO: no used_cpu_user and used_cpu_sys")
	}
	s.cpu = time.Duration((user + sys) * float64(time.Second))
	return s, nil
}

// minimalScript is the least a reservation on three counters can cost in
// Redis: one script that reads each counter, compares it with the
// limit, and only if all fit adds the amount and sets the expiry. What
// tokenwarden's scripts cost above it is their own.
var minimalScript = redis.NewScript(`
local amount, limit = tonumber(ARGV[1]), tonumber(ARGV[2])
for i = 1, #KEYS do
  local v = tonumber(redis.call('GET', KEYS[i]) or '0')
  if v + amount > limit then return 0 end
end
for i = 1, #KEYS do
  redis.call('INCRBY', KEYS[i], amount)
  redis.call('PEXPIRE', KEYS[i], ARGV[3])
end
return 1
`)

// runMinimalScript runs the minimal script n times from workers
// goroutines, on the same tenants' keys as the load, and returns the
// Redis time per call from commandstats. Nothing else may use the
// Redis meanwhile.
func runMinimalScript(ctx context.Context, c *redis.Client, tenants, workers, n int) (float64, error) {
	if err := minimalScript.Load(ctx, c).Err(); err != nil {
		return 0, err
	}
	before, err := readRedisStats(ctx, c)
	if err != nil {
		return 0, err
	}
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Go(func() {
			for i := w; i < n; i += workers {
				t := strconv.Itoa(i % tenants)
				keys := []string{"loadgen:min:{" + t + "}:requests", "loadgen:min:{" + t + "}:tokens", "loadgen:min:{" + t + "}:cost"}
				if err := minimalScript.EvalSha(ctx, c, keys, 1, int64(1)<<50, 60000).Err(); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return 0, fmt.Errorf("minimal script: %w", err)
	}
	after, err := readRedisStats(ctx, c)
	if err != nil {
		return 0, err
	}
	return after.sub(before).usecPerCall(), nil
}
