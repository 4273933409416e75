-- library.lua, counters.lua and functions.lua, in this order, are the
-- Redis function library behind redisstore: the arithmetic of
-- accounting/memstore in Lua, and the functions that use it. The Go
-- side puts two lines in front of them: the shebang, naming the library
-- after a hash of its code, and
--
--   local SLOTS, RECORD_TTL, GRAIN, LEASE_RETRY, LIFETIME_GRACE, RESET_KEPT =
--     <accounting.SlidingSlots>, <accounting.RecordTTL in µs>,
--     <accounting.RecordGrain in µs>, <accounting.ConcurrentRetryAfter in µs>,
--     <accounting.LifetimeGrace in µs>, <accounting.ResetKept in µs>
--   local V = '<hash>'
--
-- V ends every function's name, so that replicas running different
-- versions of tokenwarden on one Redis never call each other's code.
--
-- Redis runs Lua 5.1, where every number is a double. Times are µs since
-- the Unix epoch (about 2^51 today) and amounts are integers below 2^53
-- (the Go side checks), so every value here stays an exact integer except
-- a token bucket's tokens, which are floats as in memstore. floor(a / b)
-- is exact for integers 0 <= a, 0 < b with a + b < 2^53: the quotient
-- could only round up to the next integer if 1/b were below half its ulp,
-- which takes a + b >= 2^53.
--
-- What a call costs Redis, in instructions (callgrind, Redis 7.0): the
-- call itself with its I/O about 13k, and 3.5k per key; a command 4k
-- (GET) to 10k (SET with an expiry; with KEEPTTL 6k); TIME 7k; a table 2k
-- to 5k, and a table that grows is rebuilt at every power of two; a
-- number formatted as text 2k, parsed by tonumber 2k; a call of a C
-- function such as math.floor 700, of a Lua function 500; struct.pack or
-- unpack of three doubles 1.5k. A command's answer costs Lua too: a
-- status such as SET's OK becomes a table, an integer or a missing value
-- costs little, and a number passed as an argument is formatted with
-- snprintf (2k), a string passed as it is. So the code here keeps its
-- tables across calls (Redis runs one call at a time), takes its items as
-- one string of packed doubles, read item by item where they stand, and
-- answers the same way (leaving the caller to derive what it can), reads
-- every counter with one MGET and overwrites each with one SETRANGE from
-- offset '0' (which keeps the key's expiry and answers an integer) unless
-- the expiry must move, stores counters as packed doubles (which also
-- keeps a bucket's float tokens bit for bit), lets a charge to a sliding
-- window's current slot touch only the value's first three doubles, and
-- rounds with the % operator: x - x % 1 is floor(x).
--
-- Counter values, little-endian doubles:
--   fixed window, calendar month: window index, used, [in flight]
--   lifetime:                     the run's start (µs), used, [in flight]
--   token bucket:                 tokens, µs of the last refill, µs until
--                                 which the key's expiry keeps it,
--                                 [in flight]
--   sliding window:               newest slot index n, the total of the
--                                 amounts, the amount of slot n, born, k,
--                                 k pieces, then the amounts of slots
--                                 n-1, ... down to n-m+1, newest first,
--                                 for some m <= SLOTS+1 (zeros at the old
--                                 end are dropped)
-- where "in flight", optional (a counter written by an earlier version
-- has none), is born and the pieces up to the value's end, and a piece
-- is two doubles: its start (µs; accounting.InFlightPiece) and what the
-- reservations in flight charged in it hold. Pieces are kept newest
-- first; one that stopped counting (accounting.InFlightFrom), or holds
-- nothing, is dropped when a piece is added. born is when the counter
-- was last reset (µs), or 0: a reservation made before it changes
-- nothing on the counter. A fixed window's or a run's pieces hold only
-- what its current window or run was charged, and go when it changes.
-- Earlier versions read the first two or three doubles of a fixed
-- window, a run or a bucket and never look past them (and rewrite the
-- value without what follows), so both share those keys; a sliding
-- window's layout is new, under a key of its own ('w', where earlier
-- versions' is 's').
-- A concurrent limit's counter (leases) is a sorted set instead: its
-- members are the record keys of the reservations holding a lease, each
-- scored with the lease's expiry (µs, store clock). A lease counts while
-- its expiry is after now; expired ones are trimmed whenever the counter
-- is checked, and the key's PX (the lease) reclaims an abandoned set.
-- A reservation record (the last of KEYS) is one double: the reservation's
-- time, or minus the time of the release that left it as a tombstone;
-- when the reservation left optional items uncharged, their indexes
-- (1-based) follow the time.
-- Either counts until RECORD_TTL after the end of that time's GRAIN on
-- the store's clock (accounting.RecordExpiry, as in memstore); PX
-- reclaims the key on Redis's own.
--
-- Every call's ARGV[1] is the clock: "0" in production (TIME), or in the
-- package's tests an offset (µs) added to TIME, or "@" and a frozen time
-- (µs), either after "~" to keep the calls off their fast paths. ARGV[2] packs the items; ARGV[3], only when some are calendar
-- windows in a time zone, their windows' boundaries.

local RING = SLOTS + 1 -- the slots a sliding window holds

-- Algorithm codes, as packed by the Go side. tw_reserve and tw_release
-- take an optional item's (a shadow limit's) code with OPTIONAL added, so
-- every code stays below OPTIONAL.
local FIXED, MONTH, SLIDING, BUCKET, LEASES, LIFETIME = 0, 1, 2, 3, 4, 5
-- A calendar window in a time zone: its period is its number k among the
-- call's zoned items, and ARGV[3] holds, as doubles, the boundaries
-- 4k-3..4k of the windows around the caller's time (see window).
local ZONED = 6
local OPTIONAL = 8

-- SKIPPED stands, in tw_reserve's answer, for the level of an optional
-- item that was not charged: no level is ever that low.
local SKIPPED = -2 ^ 60

-- Redis's API and Lua's libraries are globals of a call, not of loading:
-- the first call binds them.
local call, spack, sunpack, floor, format, byte, sub, rep
local RECORD_PX, FMT, ZERO

local function init()
  call, spack, sunpack = redis.call, struct.pack, struct.unpack
  floor = math.floor
  format, byte, sub, rep = string.format, string.byte, string.sub, string.rep
  RECORD_PX = format('%d', math.ceil((RECORD_TTL + GRAIN) / 1000))
  FMT = {}
  ZERO = spack('<d', 0)
end

-- fmt returns the struct format of k doubles.
local function fmt(k)
  local f = FMT[k]
  if f == nil then
    f = '<' .. rep('d', k)
    FMT[k] = f
  end
  return f
end

-- Scratch tables that every call reuses, Redis running one call at a time:
-- levels holds each item's level (see reserve), helds what its counter
-- holds in flight, opt whether it is optional, sts the items' states,
-- pool the state tables (item i's is pool[i]), and wkind, wval and wms
-- the write a fast path plans for each item (see flush).
local levels, helds, sts, pool, opt = {}, {}, {}, {}, {}
local wkind, wval, wms = {}, {}, {}

-- now is the store's clock for the call (µs). pad lengthens key lifetimes
-- under a frozen test clock, whose keys would otherwise expire on Redis's
-- running clock while the test's stands still.
local now, pad = 0, 0

-- fast is whether tw_reserve and tw_settle may take their fast paths;
-- the package's tests turn them off to hold the general path alone to
-- the contract.
local fast = true

-- member is the call's reservation (its record key): the member of the
-- sorted sets of leases it takes or returns.
local member = false

local function setclock(arg)
  fast = true
  if byte(arg, 1) == 126 then -- "~": no fast paths, tests only
    fast, arg = false, sub(arg, 2)
  end
  if arg == '0' then
    -- Arithmetic converts TIME's strings for less than tonumber does.
    local t = call('TIME')
    now, pad = t[1] * 1000000 + t[2], 0
  elseif byte(arg, 1) == 64 then -- "@": frozen, tests only
    now, pad = tonumber(sub(arg, 2)), 3600000
  else
    local t = call('TIME')
    now, pad = t[1] * 1000000 + t[2] + arg, 0
  end
end

-- zb holds the boundaries of the call's zoned items as packed doubles
-- (ARGV[3]), false when it has none. window reads the four of an item
-- where they stand.
local zb = false

local function setzones(arg)
  zb = arg or false
end

-- count returns the number of items in ARGV[2], items of per doubles
-- each.
local function count(arg, per)
  local n = #arg / (8 * per)
  if n % 1 ~= 0 then error('tokenwarden: malformed items') end
  return n
end

-- items unpacks ARGV[2], items of per doubles each: their values in one
-- table, and their number.
local function items(arg, per)
  local n = count(arg, per)
  if n == 0 then return nil, 0 end
  local k = n * per
  return { sunpack(FMT[k] or fmt(k), arg) }, n
end

-- ceiling is ceil(x) without a C call.
local function ceiling(x)
  local c = x - x % 1
  if c < x then return c + 1 end
  return c
end

-- px converts a lifetime in µs to PX's milliseconds, rounding up so that
-- a key never disappears before its state stops mattering.
local function px(us) return format('%d', ceiling(us / 1000) + pad) end

-- load reads the counters of KEYS[1..n] in one MGET.
local function load(keys, n)
  if n == 0 then return nil end
  return call('MGET', unpack(keys, 1, n))
end

-- record reads a reservation record or tombstone: its signed time, or nil
-- when there is none that still counts.
local function record(v)
  if not v then return nil end
  local t = sunpack('<d', v)
  local at = t
  if at < 0 then at = -at end
  if at - at % GRAIN + GRAIN + RECORD_TTL <= now then return nil end
  return t
end

-- write_record records an admitted reservation under rkey, unless a
-- tombstone there says it was released before it arrived: then it
-- returns false, leaving the tombstone. val is the record when it is
-- more than the time (see reserve); nil means the time alone.
local function write_record(rkey, val)
  local old = call('SET', rkey, val or spack('<d', now), 'PX', RECORD_PX, 'GET')
  if old then
    local t = record(old)
    if t ~= nil and t < 0 then
      call('SET', rkey, old, 'PX', RECORD_PX)
      return false
    end
  end
  return true
end

