-- counters.lua follows library.lua: the arithmetic of memstore's counters,
-- for the general path of every function (fast_reserve and fast_settle in
-- functions.lua repeat the common cases inline).

-- Fixed windows and calendar months (UTC months, with Howard Hinnant's
-- days <-> civil algorithms).

local DAY = 86400000000

local function civil_from_days(z)
  z = z + 719468
  local era = floor(z / 146097)
  local doe = z - era * 146097
  local yoe = floor((doe - floor(doe / 1460) + floor(doe / 36524) - floor(doe / 146096)) / 365)
  local y = yoe + era * 400
  local doy = doe - (365 * yoe + floor(yoe / 4) - floor(yoe / 100))
  local mp = floor((5 * doy + 2) / 153)
  local m
  if mp < 10 then m = mp + 3 else m = mp - 9 end
  if m <= 2 then y = y + 1 end
  return y, m
end

local function days_from_civil(y, m, d)
  if m <= 2 then y = y - 1 end
  local era = floor(y / 400)
  local yoe = y - era * 400
  local mp
  if m > 2 then mp = m - 3 else mp = m + 9 end
  local doy = floor((153 * mp + 2) / 5) + d - 1
  local doe = yoe * 365 + floor(yoe / 4) - floor(yoe / 100) + doy
  return era * 146097 + doe - 719468
end

-- The month last asked about: [month_from, month_to) and its index, so
-- that the civil arithmetic runs once a month, not on every call.
local month_from, month_to, month_idx = 0, 0, 0

-- window is accounting.FixedWindowAt: the window holding t and its end.
-- A zoned window is picked from the boundaries the caller computed (the
-- window before the caller's, the caller's and the next), identified by
-- its start.
local function window(alg, p, t)
  if alg == ZONED then
    local s0, s1, s2, s3 = sunpack('<dddd', zb, 32 * p - 31)
    if t < s1 then return s0, s1 end
    if t < s2 then return s1, s2 end
    return s2, s3
  end
  if alg == MONTH then
    if t >= month_from and t < month_to then return month_idx, month_to end
    local y, m = civil_from_days(floor(t / DAY))
    local ny, nm = y, m + 1
    if nm == 13 then ny, nm = y + 1, 1 end
    month_from, month_to = days_from_civil(y, m, 1) * DAY, days_from_civil(ny, nm, 1) * DAY
    month_idx = y * 12 + m - 1
    return month_idx, month_to
  end
  local idx = t / p
  idx = idx - idx % 1
  return idx, (idx + 1) * p
end

-- What reservations in flight hold (accounting.CounterState.InFlight;
-- memstore's inflight.go says why pieces). A state's pieces are pc, a
-- flat array of starts and amounts, newest first, np of them; hs is what
-- the pieces that count at now hold, born the counter's last reset (µs,
-- or 0), and grew whether pieces were added or dropped (the value
-- changes length).

-- piece is accounting.InFlightPiece: the piece a reservation made at t
-- holds its amount in.
local function piece(alg, period, t)
  local p = t - t % GRAIN
  if alg == SLIDING then
    local s = t - t % period
    if s > p then p = s end
  end
  return p
end

-- from is accounting.InFlightFrom: the first piece that counts at now.
local function from(alg, period)
  local f = now - now % GRAIN - SLOTS * GRAIN
  if alg == SLIDING then
    local s = now - now % period - SLOTS * period
    if s > f then f = s end
  end
  return f
end

-- expiry is accounting.RecordExpiry: when a record written at t stops
-- counting.
local function expiry(t)
  return t - t % GRAIN + GRAIN + RECORD_TTL
end

-- born_until is how long born must be kept: until no reservation made
-- before it (a hold's included) can be settled or released
-- (accounting.ResetKept).
local function born_until(born)
  if born == 0 then return 0 end
  return born + RESET_KEPT
end

-- born_of reads the born of value v of a counter of algorithm alg (0
-- when it has none).
local function born_of(alg, v)
  if not v or alg == LEASES then return 0 end
  local pos = 17
  if alg == BUCKET then
    pos = 25
  elseif alg == SLIDING then
    pos = 33
  end
  if #v < pos then return 0 end
  return sunpack('<d', v, pos)
end

-- drop_pieces forgets st's pieces: they held what a window or run that
-- has ended was charged.
local function drop_pieces(st)
  local pc = st.pc
  for j = 1, 2 * st.np do pc[j] = nil end
  if st.np > 0 then st.grew = true end
  st.np, st.hs = 0, 0
end

-- read_tail reads born and k pieces of value v from byte pos on into st
-- (k nil: pieces up to the value's end) and returns the position after
-- them. A value without them (v nil, or ending before pos) has none.
local function read_tail(st, v, pos, k)
  drop_pieces(st)
  st.born, st.grew = 0, false
  if not v or #v < pos then return pos end
  st.born = sunpack('<d', v, pos)
  pos = pos + 8
  if k == nil then k = (#v - pos + 1) / 16 end
  if k > 0 then
    local f = from(st.alg, st.period)
    local r = { sunpack(FMT[2 * k] or fmt(2 * k), v, pos) }
    local pc, hs = st.pc, 0
    for j = 1, 2 * k, 2 do
      local p, a = r[j], r[j + 1]
      pc[j], pc[j + 1] = p, a
      if p >= f then hs = hs + a end
    end
    st.np, st.hs = k, hs
  end
  return pos + 16 * k
end

-- tail is born and the pieces, as stored.
local function tail(st)
  local k = st.np
  if k == 0 then return spack('<d', st.born) end
  return spack('<d', st.born) .. spack(FMT[2 * k] or fmt(2 * k), unpack(st.pc, 1, 2 * k))
end

-- hold adds amount, charged now, to its piece. A new piece goes in its
-- place; the pieces that stopped counting or hold nothing go.
local function hold(st, amount)
  if amount <= 0 then return end
  st.hs, st.dirty = st.hs + amount, true
  local pc, k = st.pc, st.np
  local pn = piece(st.alg, st.period, now)
  for j = 1, 2 * k, 2 do
    if pc[j] == pn then
      pc[j + 1] = pc[j + 1] + amount
      return
    end
  end
  local f = from(st.alg, st.period)
  local out, o = {}, 0
  for j = 1, 2 * k, 2 do
    local p, a = pc[j], pc[j + 1]
    if pn and p < pn then
      out[o + 1], out[o + 2], o, pn = pn, amount, o + 2, false
    end
    if p >= f and a > 0 then
      out[o + 1], out[o + 2], o = p, a, o + 2
    end
  end
  if pn then out[o + 1], out[o + 2], o = pn, amount, o + 2 end
  st.pc, st.np, st.grew = out, o / 2, true
end

-- unhold takes amount, charged at t by a reservation now settled or
-- released, out of its piece.
local function unhold(st, amount, t)
  if amount <= 0 then return end
  local pt = piece(st.alg, st.period, t)
  local pc = st.pc
  for j = 1, 2 * st.np, 2 do
    if pc[j] == pt then
      local a = pc[j + 1]
      local b = a - amount
      if b < 0 then b = 0 end
      if b ~= a then
        pc[j + 1], st.dirty = b, true
        if pt >= from(st.alg, st.period) then st.hs = st.hs - (a - b) end
      end
      return
    end
  end
end

-- held_until is until when a bucket's key must stay whatever its
-- tokens: while its born counts, and its pieces do (the newest stops
-- counting last).
local function held_until(st)
  local u = born_until(st.born)
  if st.np > 0 then
    local x = expiry(st.pc[1])
    if x > u then u = x end
  end
  return u
end

-- life is the expiry (PX) of a key whose state matters for us µs more,
-- born included.
local function life(st, us)
  local b = born_until(st.born) - now
  if b > us then us = b end
  return px(us)
end

-- roll moves a fixed window's state to the window holding now.
local function roll(st)
  local idx, e = window(st.alg, st.period, now)
  if st.w ~= idx then
    st.w, st.u, st.ttl = idx, 0, true
    drop_pieces(st)
  end
  st.e = e
  return idx, e
end

-- Token buckets refill limit per period: rate (st.rate) per µs.

-- stale reports whether a bucket last written at time at, holding t, is
-- full again by now: memstore's expiry, at + full_in, is past. As now - at
-- is an integer, at + ceil(x) <= now exactly when x <= now - at.
local function stale(t, at, cap, rate)
  if t >= cap then return at <= now end
  return (cap - t) / rate <= now - at
end

-- How a counter's new value is written: SETRANGE over its first bytes
-- (the key keeps its expiry; Redis answers with an integer, which costs
-- Lua less than SET's status reply), SET with a new expiry, or DEL.
local RANGE, EXPIRING, GONE = 1, 2, 3

-- write writes a counter's new value as kind says (nothing for any other
-- kind); ms is the expiry of EXPIRING.
local function write(key, kind, val, ms)
  if kind == RANGE then
    call('SETRANGE', key, '0', val)
  elseif kind == EXPIRING then
    call('SET', key, val, 'PX', ms)
  elseif kind == GONE then
    call('DEL', key)
  end
end

-- bucket_value is how to write a bucket holding t, last refilled at at,
-- whose key the stored keep says is kept until then (new: whether it has
-- no key), and which something else keeps until hold (µs; held_until):
-- write's kind, the value's first three doubles and the expiry. The
-- key's expiry is memstore's (full_in from now) made a tenth of the
-- period longer, and only moved when it falls short, so that a busy
-- bucket sets it once per tenth of its capacity, not per charge.
local function bucket_value(t, at, keep, new, cap, rate, period, hold)
  local x = 0
  if t < cap then
    x = (cap - t) / rate
  elseif hold <= now then
    -- Full, and nothing keeps it: the same as no key at all.
    return GONE
  end
  local need = hold - now
  if x > need then need = x end
  if not new and need <= keep - now then
    return RANGE, spack('<ddd', t, at, keep)
  end
  local us = ceiling(x) + period / SLOTS
  if hold - now > us then us = hold - now end
  keep = now + us
  return EXPIRING, spack('<ddd', t, at, keep - keep % 1), px(us)
end

-- full_in is memstore's bucketFullIn: µs until the bucket is full.
local function full_in(st, tokens)
  local missing = st.cap - tokens
  if missing <= 0 then return 0 end
  return ceiling(missing / st.rate)
end

local function refill(st)
  local at = st.at
  if now > at then
    local t = st.t + (now - at) * st.rate
    if t > st.cap then t = st.cap end
    st.t, st.at = t, now
  end
end

-- Sliding windows. A state holds n (the newest slot, false if none),
-- total, head (slot n's amount), raw (the value as stored) and so (where
-- its older slots start in raw); a charge to slot n needs no more.
-- Anything else expands the slots into a: a[j] is the amount of slot
-- n-j+1 for j = 1..m.

-- expand fills in a sliding window's slots.
local function expand(st)
  if st.a then return st.a end
  local a, m = {}, 0
  if st.n then
    m = st.m
    -- The newest slot as slot_add may have changed it since the key was
    -- read (an earlier item of the call on the same key).
    a[1] = st.head
    if m > 1 then
      local r = { sunpack(FMT[m - 1] or fmt(m - 1), st.raw, st.so) }
      for j = 2, m do a[j] = r[j - 1] end
    end
  end
  st.a, st.m = a, m
  return a
end

-- used returns how much of a sliding window counts at slot cur: its
-- slots from cur-SLOTS on.
local function used(st, cur)
  local n = st.n
  if not n then return 0 end
  -- Every slot kept is within SLOTS of n, so of cur when n >= cur.
  if n >= cur and not st.a then return st.total end
  local a = expand(st)
  local last = n - cur + RING
  if last > st.m then last = st.m end
  local sum = 0
  for j = 1, last do sum = sum + a[j] end
  return sum
end

-- slot_add adds delta to a sliding window's slot target, never below
-- zero. A slot newer than the newest moves the window forward, dropping
-- the slots that leave it. (A target older than the window can only
-- follow a clock that went back by more than a window; it is charged to
-- the oldest slot, so that nothing charged is forgotten early.)
local function slot_add(st, target, delta)
  local n = st.n
  st.dirty = true
  if n == target and not st.a then
    local head = st.head
    local v = head + delta
    if v < 0 then v = 0 end
    st.head, st.total = v, st.total + (v - head)
    return
  end
  local a = expand(st)
  local m = st.m
  if not n then
    n, m = target, 1
    a[1] = 0
    st.ttl = true
  elseif target > n then
    local d = target - n
    local keep = RING - d
    if keep > m then keep = m end
    for j = keep, 1, -1 do a[j + d] = a[j] end
    for j = 1, d do
      if j > RING then break end
      a[j] = 0
    end
    m = keep + d
    if m > RING then m = RING end
    n = target
    st.ttl = true
  elseif target < n - SLOTS then
    target = n - SLOTS
  end
  local j = n - target + 1
  for jj = m + 1, j do a[jj] = 0 end
  if j > m then m = j end
  local v = a[j] + delta
  if v < 0 then v = 0 end
  a[j] = v
  st.n, st.m = n, m
end

-- State. Item i's counter state comes from vals[i], its value (false if
-- there is no key). Items of one call that name the same key share one
-- state, as they share memstore's counter. A state that has expired reads
-- as a fresh one, exactly where memstore replaces an expired counter. ttl
-- says whether writing the key must set its expiry (it is new, or its
-- window or newest slot moved); otherwise SET keeps it.
local function state(keys, vals, i, alg, limit, cap, period)
  local key = keys[i]
  for j = 1, i - 1 do
    if keys[j] == key then
      sts[i] = sts[j]
      return sts[j]
    end
  end
  local st = pool[i]
  if st == nil then
    st = { key = false, alg = 0, limit = 0, cap = 0, period = 0, dirty = false, ttl = false,
      w = false, u = 0, e = 0, t = 0, at = 0, keep = 0, rate = 0,
      n = false, total = 0, head = 0, raw = false, so = 0, a = false, m = 0, cur = 0,
      born = 0, pc = {}, np = 0, hs = 0, grew = false }
    pool[i] = st
  end
  local v = vals[i]
  st.key, st.alg, st.limit, st.cap, st.period, st.dirty, st.ttl = key, alg, limit, cap, period, false, not v
  st.raw = v
  if alg == SLIDING then
    if v then
      local k
      st.n, st.total, st.head, k = sunpack('<dddd', v)
      st.so = read_tail(st, v, 33, k)
      st.m = 1 + (#v - st.so + 1) / 8
    else
      st.n = false
      read_tail(st, false)
    end
    st.a = false
  elseif alg == BUCKET then
    local rate = limit / period
    local t, at, keep
    if v then t, at, keep = sunpack('<ddd', v) end
    if t == nil then
      t, at, keep = cap, now, 0
    elseif stale(t, at, cap, rate) then
      t, at = cap, now
    end
    st.t, st.at, st.keep, st.rate = t, at, keep, rate
    read_tail(st, v, 25)
  elseif alg == LEASES then
    st.np, st.hs, st.born = 0, 0, 0
  else
    read_tail(st, v, 17)
    if v then
      st.w, st.u = sunpack('<dd', v)
      if alg == LIFETIME and st.w + period + LIFETIME_GRACE <= now then
        -- Kept past its time on Redis's clock (memstore would have
        -- dropped it): a new run.
        st.w, st.u, st.ttl = false, 0, true
        drop_pieces(st)
      end
    else
      st.w, st.u = false, 0
    end
  end
  sts[i] = st
  return st
end

-- level tells whether amount fits the counter: its level before the
-- charge (used; a bucket's tokens) if it does, nil if not. It is
-- memstore's check reduced to its verdict; explain gives the rest.
local function level(st, amount)
  local alg = st.alg
  if alg == LEASES then
    -- Trimming the expired leases changes what no one can see.
    call('ZREMRANGEBYSCORE', st.key, '-inf', format('%d', now))
    local u = call('ZCARD', st.key)
    st.u, st.hs = u, u
    if amount <= st.limit and u + amount <= st.limit then return u end
    return nil
  end
  if alg == LIFETIME then
    -- A run starts at its first charge; its key is kept until e.
    local start = st.w or now
    local e = start + st.period
    st.e = e + LIFETIME_GRACE
    local u = st.u
    if now < e and amount <= st.limit and u + amount <= st.limit then return u end
    return nil
  end
  if alg == BUCKET then
    refill(st)
    local t = st.t
    if amount <= t and amount <= st.cap then return t end
    return nil
  end
  local limit = st.limit
  if amount > limit then return nil end
  local u
  if alg == SLIDING then
    local cur = now / st.period
    cur = cur - cur % 1
    st.cur = cur
    u = used(st, cur)
  else
    roll(st)
    u = st.u
  end
  if u + amount <= limit then return u end
  return nil
end

-- explain is memstore's check in full, for a reservation that does not
-- fit: the item's remaining, reset µs, fits, retry µs, never fits, mark,
-- what its pieces that count hold (a count of leases: the leases) and
-- its born (its epoch).
local function explain(st, amount)
  local alg = st.alg
  local rem, reset, fits, retry, never, mark = 0, 0, 0, 0, 0, 0
  if alg == LEASES then
    -- level counted the live leases; when one comes back is not known.
    local limit, u = st.limit, st.u
    rem = limit - u
    if amount > limit then
      never = 1
    elseif u + amount <= limit then
      fits = 1
    else
      retry = LEASE_RETRY
    end
  elseif alg == LIFETIME then
    -- A refusal is final: no retry time. never is 2 once the run's
    -- wall-clock cap has passed.
    local start = st.w or now
    local e, limit, u = start + st.period, st.limit, st.u
    rem, reset, mark = limit - u, e - now, start
    if now >= e then
      never = 2
    elseif amount > limit then
      never = 1
    elseif u + amount <= limit then
      fits = 1
    end
  elseif alg == BUCKET then
    refill(st)
    local t = st.t
    rem, reset = t - t % 1, full_in(st, t)
    if amount > st.cap then
      never = 1
    elseif amount <= t then
      fits = 1
    else
      retry = ceiling((amount - t) / st.rate)
    end
  elseif alg == SLIDING then
    local slot, limit = st.period, st.limit
    local cur = now / slot
    cur = cur - cur % 1
    local u = used(st, cur)
    rem, mark = limit - u, cur
    local n, a, m = st.n, expand(st), st.m
    -- The newest slot with an amount sets the reset.
    for j = 1, m do
      local k = n - j + 1
      if k < cur - SLOTS then break end
      if a[j] > 0 then
        reset = (k + RING) * slot - now
        break
      end
    end
    if amount > limit then
      never = 1
    elseif u + amount <= limit then
      fits = 1
    else
      -- Slot k leaves the count at (k+RING)*slot; free slots oldest
      -- first until the amount fits.
      local need = u + amount - limit
      for k = cur - SLOTS, cur do
        local j = n - k + 1
        if j >= 1 and j <= m then
          need = need - a[j]
          if need <= 0 then
            retry = (k + RING) * slot - now
            break
          end
        end
      end
    end
  else
    local idx, e = roll(st)
    local limit, u = st.limit, st.u
    rem, reset, mark = limit - u, e - now, idx
    if amount > limit then
      never = 1
    elseif u + amount <= limit then
      fits = 1
    else
      retry = e - now
    end
  end
  return rem, reset, fits, retry, never, mark, st.hs, st.born
end

-- settle is memstore's settle: add delta (actual minus reserved) to the
-- window or slot the charge was booked in (mark), and take what the
-- reservation, made at t, held in flight (reserved) out of its piece.
-- When that window has passed, an extra charge lands on the current one
-- and a refund is dropped. (The caller leaves out a reservation made
-- before the counter's last reset: it changes nothing.)
local function settle(st, delta, mark, reserved, t)
  local alg = st.alg
  if alg == LEASES then
    -- The lease goes back, whatever the amounts.
    call('ZREM', st.key, member)
    return
  end
  if alg == LIFETIME then
    -- Only the run that was charged: not another one (or none) that
    -- took its key after it expired.
    if not st.w or st.w ~= mark then return end
    unhold(st, reserved, t)
    if delta ~= 0 then
      local u = st.u + delta
      if u < 0 then u = 0 end
      st.u, st.dirty = u, true
    end
  elseif alg == BUCKET then
    unhold(st, reserved, t)
    if delta ~= 0 then
      refill(st)
      local x = st.t - delta
      if x > st.cap then x = st.cap end
      st.t, st.dirty = x, true
    end
  elseif alg == SLIDING then
    unhold(st, reserved, t)
    if delta == 0 then return end
    local cur = now / st.period
    cur = cur - cur % 1
    local target = mark
    if mark < cur - SLOTS then
      if delta < 0 then return end
      target = cur
    end
    slot_add(st, target, delta)
  else
    local idx = window(st.alg, st.period, now)
    if mark == idx and st.w == idx then
      unhold(st, reserved, t)
      if delta ~= 0 then
        local u = st.u + delta
        if u < 0 then u = 0 end
        st.u, st.dirty = u, true
      end
    elseif delta > 0 then
      roll(st)
      st.u, st.dirty = st.u + delta, true
    end
  end
end

-- put writes value v over a counter's old one: with a new expiry (ms)
-- when ms is given, else keeping its expiry (SETRANGE when v covers the
-- old value, whose first bytes it replaces).
local function put(st, v, ms)
  if ms then
    call('SET', st.key, v, 'PX', ms)
  elseif st.raw and #v >= #st.raw then
    call('SETRANGE', st.key, '0', v)
  else
    call('SET', st.key, v, 'KEEPTTL')
  end
end

-- save writes back every changed counter, with memstore's expiry: a key
-- lives as long as its state matters (a bucket's a little longer, see
-- bucket_value), and as its born and a bucket's pieces do.
local function save(n)
  for i = 1, n do
    local st = sts[i]
    if st.dirty then
      st.dirty = false
      local alg = st.alg
      if alg == BUCKET then
        local kind, v, ms = bucket_value(st.t, st.at, st.keep, st.ttl, st.cap, st.rate, st.period, held_until(st))
        if kind == GONE then
          call('DEL', st.key)
        else
          if st.born ~= 0 or st.np > 0 then v = v .. tail(st) end
          put(st, v, ms)
        end
      elseif alg == SLIDING then
        local a, v = st.a, nil
        if not a then
          v = spack('<dddd', st.n, st.total, st.head, st.np) .. tail(st) .. sub(st.raw, st.so)
        else
          -- Drop the zeros at the old end (keeping the newest slot).
          local m = st.m
          while m > 1 and a[m] <= 0 do m = m - 1 end
          local total = 0
          for j = 1, m do total = total + a[j] end
          v = spack('<dddd', st.n, total, a[1], st.np) .. tail(st)
          if m > 1 then v = v .. spack(FMT[m - 1] or fmt(m - 1), unpack(a, 2, m)) end
        end
        if st.ttl then
          put(st, v, life(st, (st.n + RING) * st.period - now))
        else
          put(st, v)
        end
      else
        local v = spack('<dd', st.w, st.u)
        if st.born ~= 0 or st.np > 0 then v = v .. tail(st) end
        if st.ttl then
          put(st, v, life(st, st.e - now))
        else
          put(st, v)
        end
      end
    end
  end
end
