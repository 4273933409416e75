-- functions.lua follows counters.lua: the library's functions.

-- distinct reports whether the first n keys are distinct: the fast paths
-- take only items on distinct keys.
local function distinct(keys, n)
  for i = 2, n do
    local key = keys[i]
    for j = 1, i - 1 do
      if keys[j] == key then return false end
    end
  end
  return true
end

-- flush writes what a fast path planned for items 1..n: wkind[i] is write's
-- kind, wval[i] the value and wms[i] the expiry.
local function flush(keys, n)
  for i = 1, n do
    local kind = wkind[i]
    if kind == RANGE then
      call('SETRANGE', keys[i], '0', wval[i])
    elseif kind ~= 0 then
      write(keys[i], kind, wval[i], wms[i])
    end
  end
end

-- The fast paths read a value's pieces where they stand: k pieces from
-- byte pos on.

-- live_sum is what the k pieces of v from byte pos on that count (start
-- at f or later) hold.
local function live_sum(v, pos, k, f)
  local sum = 0
  for j = 0, k - 1 do
    local p, a = sunpack('<dd', v, pos + 16 * j)
    if p >= f then sum = sum + a end
  end
  return sum
end

-- piece_at is the byte position of the piece that starts at p among the
-- k pieces of v from byte pos on, nil if there is none.
local function piece_at(v, pos, k, p)
  for j = 0, k - 1 do
    local q = pos + 16 * j
    if sunpack('<d', v, q) == p then return q end
  end
  return nil
end

-- patch is v with its bytes from position at on replaced by b.
local function patch(v, at, b)
  return sub(v, 1, at - 1) .. b .. sub(v, at + #b)
end

-- moved_on is slot_add and save for a charge of amount to the current
-- slot cur of a sliding window whose newest slot sn is older, read from
-- its stored value val (k pieces, born): it returns the amount of the
-- slots that stay in the window, the new value (the header; the new
-- piece, then the old pieces that count from f on and hold something;
-- zeros for the slots between; the old slots that stay, zeros at the old
-- end dropped), its expiry, and what its pieces hold. The old slots and
-- pieces are read where they stand and copied as bytes.
local function moved_on(val, sn, cur, amount, period, k, born, f)
  local so = 41 + 16 * k
  local d = cur - sn
  -- Old slot j (slot sn-j+1) stays while j <= RING - d; slot sn is the
  -- head, the others start at so.
  local keep = RING - d
  local m = 1 + (#val - so + 1) / 8
  if keep > m then keep = m end
  local u, last = 0, 0
  for j = 1, keep do
    local x
    if j == 1 then x = sunpack('<d', val, 17) else x = sunpack('<d', val, so + 8 * (j - 2)) end
    if x > 0 then u, last = u + x, j end
  end
  local pieces, np, hs = spack('<dd', piece(SLIDING, period, now), amount), 1, amount
  for j = 0, k - 1 do
    local q = 41 + 16 * j
    local p, a = sunpack('<dd', val, q)
    if p >= f and a > 0 then
      pieces, np, hs = pieces .. sub(val, q, q + 15), np + 1, hs + a
    end
  end
  local value = spack('<ddddd', cur, u + amount, amount, np, born) .. pieces
  if last > 0 then
    value = value .. rep(ZERO, d - 1) .. sub(val, 17, 24)
    if last > 1 then value = value .. sub(val, so, so + 8 * (last - 1) - 1) end
  end
  local us = (cur + RING) * period - now
  local b = born_until(born) - now
  if b > us then us = b end
  return u, value, px(us), hs
end

-- The struct formats of one item of tw_reserve and of tw_settle.
local ITEM5, ITEM8 = '<ddddd', '<dddddddd'

-- fast_reserve is reserve for what nearly every call is: items on
-- distinct keys that exist and all fit, each a fixed window or calendar
-- month charged in its current window, a token bucket, or a sliding
-- window charged in its newest slot or a newer one (see moved_on), each
-- charged in the piece its last charge went to (but a sliding window
-- moving on), none ever reset. It checks every item in
-- one loop, planning its write (wkind, wval, wms: see flush), and writes
-- them all once every item fits, with no state tables; it gives up
-- (false, having written nothing) on anything else, which reserve then
-- does the general way. The arithmetic is the general path's (state,
-- level, the charge, hold and save), item for item. It reads each item
-- from arg (ARGV[2]) where it stands rather than unpacking them all into
-- a table.
local function fast_reserve(keys, vals, arg, n)
  if not distinct(keys, n) then return false end
  local pos = 1
  for i = 1, n do
    local alg, limit, cap, period, amount
    alg, limit, cap, period, amount, pos = sunpack(ITEM5, arg, pos)
    -- An optional item takes the fast path only when it fits, which is
    -- then the same as a required one.
    if alg >= OPTIONAL then alg = alg - OPTIONAL end
    local val = vals[i]
    if not val or amount <= 0 or alg == LEASES or alg == LIFETIME then
      -- New counters, leases and lifetime budgets take the general path.
      return false
    end
    local pn = piece(alg, period, now)
    if alg == BUCKET then
      if #val < 48 then return false end
      local t, at, keep, born, p1, a1 = sunpack('<dddddd', val)
      if born ~= 0 or p1 ~= pn then return false end
      a1 = a1 + amount
      local rate = limit / period
      -- stale(), inline.
      if t >= cap then
        if at <= now then t, at = cap, now end
      elseif (cap - t) / rate <= now - at then
        t, at = cap, now
      end
      if now > at then
        t = t + (now - at) * rate
        if t > cap then t = cap end
        at = now
      end
      if amount > t or amount > cap then return false end
      t = t - amount
      -- bucket_value, whose expiry covers the piece (it stops counting
      -- after the key's state, so the key lives as long as it does).
      local kind, v, ms = bucket_value(t, at, keep, false, cap, rate, period, expiry(p1))
      if kind == RANGE then
        v = spack('<dddddd', t, at, keep, born, p1, a1)
      else
        v = v .. spack('<ddd', born, p1, a1) .. sub(val, 49)
      end
      levels[i], wkind[i], wval[i], wms[i] = t, kind, v, ms
      if #val > 48 then a1 = a1 + live_sum(val, 49, (#val - 48) / 16, from(BUCKET, period)) end
      helds[i] = a1
    elseif alg == SLIDING then
      local cur = now / period
      cur = cur - cur % 1
      if #val < 56 then return false end
      local sn, total, head, k, born, p1, a1 = sunpack('<ddddddd', val)
      if born ~= 0 or amount > limit then return false end
      if sn == cur then
        if k < 1 or p1 ~= pn or total + amount > limit then return false end
        -- Slot n is the current one, and so is its newest piece: only the
        -- header and that piece change.
        a1 = a1 + amount
        levels[i], wkind[i] = total + amount, RANGE
        wval[i] = spack('<ddddddd', cur, total + amount, head + amount, k, born, pn, a1)
        if k > 1 then a1 = a1 + live_sum(val, 57, k - 1, from(SLIDING, period)) end
        helds[i] = a1
      elseif sn < cur then
        local u, value, ms, hs = moved_on(val, sn, cur, amount, period, k, born, from(SLIDING, period))
        if u + amount > limit then return false end
        levels[i], helds[i], wkind[i], wval[i], wms[i] = u + amount, hs, EXPIRING, value, ms
      else
        -- A clock that went back: the general path.
        return false
      end
    else
      if amount > limit or #val < 40 then return false end
      local idx
      if alg == MONTH or alg == ZONED then
        idx = window(alg, period, now)
      else
        idx = now / period
        idx = idx - idx % 1
      end
      local w, u, born, p1, a1 = sunpack('<ddddd', val)
      -- A new window, a new piece or a reset counter: the general path.
      if w ~= idx or born ~= 0 or p1 ~= pn then return false end
      u = u + amount
      if u > limit then return false end
      a1 = a1 + amount
      levels[i], wkind[i], wval[i] = u, RANGE, spack('<ddddd', idx, u, born, pn, a1)
      if #val > 40 then a1 = a1 + live_sum(val, 41, (#val - 40) / 16, from(alg, period)) end
      helds[i] = a1
    end
  end
  if not write_record(keys[n + 1]) then return spack('<d', -1) end
  flush(keys, n)
  for i = 1, n do levels[n + i] = helds[i] end
  return spack(FMT[2 + 2 * n] or fmt(2 + 2 * n), 1, now, unpack(levels, 1, 2 * n))
end

-- reserve (tw_reserve): KEYS are the items' counters, then the
-- reservation's record key; ARGV[2] packs five doubles per item:
-- algorithm code, limit, capacity, period (µs: the window, or a sliding
-- window's slot) and amount.
--
-- Every item is checked before any is charged, so a request that does not
-- fit charges nothing and leaves no record. An admitted one charges every
-- item and writes its record, unless a live tombstone says that the
-- reservation was released before it arrived: then it charges nothing.
--
-- An optional item (its code plus OPTIONAL) never vetoes: the call is
-- admitted when every other item fits, and the optional item is charged
-- only if it fits too; the record lists those that were not.
--
-- A reservation on a counter reset at the call's time (born later than
-- now) runs just after the reset, at its born: it counts as made after
-- it (see accounting.Inspector.ResetCounter).
--
-- Returns packed doubles. Admitted:
--
--   code, the store's time, levels (one per item), held (one per item),
--   [borns (one per item)], run starts (one per lifetime item), states
--   (eight per optional item left uncharged)
--
-- code is 1, or 2 when some optional items were left uncharged, plus 4
-- when the borns follow (some counter was reset; else every one is 0). An
-- item's level is its counter's level after the charge: the used amount
-- before it plus the item's own amount (a window, a lifetime budget, a
-- count of leases), or the tokens left (a bucket, after every item on
-- it); SKIPPED for an optional item left uncharged. An item's held is
-- what its counter's pieces that count hold after the charge (after
-- every item on it; a count of leases: its level). The run starts are
-- those of the lifetime items, in order, 0 for one left uncharged. The
-- states are what a rejection gives (below) for each uncharged item, in
-- order. The caller derives the rest of memstore's answer from these, as
-- memstore computes it; a call without lifetime or uncharged items (the
-- fast path's, always) is 1, the time, the levels and the held alone.
-- Not admitted: 0, then per item what explain returns: remaining, reset
-- µs, fits, retry µs, never fits (1, or 2 for a lifetime budget whose
-- time is up), mark, held and born. Released: the single double -1.
local function reserve(keys, args)
  if not call then init() end
  setclock(args[1])
  setzones(args[3])
  local n = count(args[2], 5)
  member = keys[n + 1]
  local vals = load(keys, n)
  local answer = fast and fast_reserve(keys, vals, args[2], n)
  if answer then return answer end
  local v = items(args[2], 5)
  local reset = false
  for i = 1, n do
    local b = 5 * i - 4
    local code = v[b]
    if code >= OPTIONAL then
      v[b], opt[i] = code - OPTIONAL, true
    else
      opt[i] = false
    end
    local born = born_of(v[b], vals[i])
    if born ~= 0 then reset = true end
    if born > now then now = born end
  end
  local admitted, skipped = true, false
  for i = 1, n do
    local b = 5 * i - 5
    local l = level(state(keys, vals, i, v[b + 1], v[b + 2], v[b + 3], v[b + 4]), v[b + 5])
    if l ~= nil then
      levels[i] = l
    elseif opt[i] then
      levels[i], skipped = SKIPPED, true
    else
      admitted = false
    end
  end
  if not admitted then
    local r = { 0 }
    for i = 1, n do
      local o = #r
      r[o + 1], r[o + 2], r[o + 3], r[o + 4], r[o + 5], r[o + 6], r[o + 7], r[o + 8] = explain(sts[i], v[5 * i])
    end
    return spack(FMT[1 + 8 * n] or fmt(1 + 8 * n), unpack(r))
  end
  local rec, why = nil, nil
  if skipped then
    -- The record lists the items left uncharged, and the answer says
    -- why, each as a rejection would, before anything is charged.
    rec, why = { now }, {}
    for i = 1, n do
      if levels[i] == SKIPPED then
        rec[#rec + 1] = i
        local o = #why
        why[o + 1], why[o + 2], why[o + 3], why[o + 4], why[o + 5], why[o + 6], why[o + 7], why[o + 8] = explain(sts[i], v[5 * i])
      end
    end
    rec = spack(fmt(#rec), unpack(rec))
  end
  if not write_record(keys[n + 1], rec) then return spack('<d', -1) end
  -- Charge, as memstore's commit.
  for i = 1, n do
    local st, amount = sts[i], v[5 * i]
    local alg = st.alg
    if levels[i] == SKIPPED then
      -- An optional item that does not fit: nothing to charge.
      helds[i] = 0
    elseif alg == BUCKET then
      local t = st.t - amount
      st.t, st.dirty, levels[i] = t, true, t
      hold(st, amount)
    elseif alg == LIFETIME then
      if not st.w then st.w = now end
      st.u, st.dirty = st.u + amount, true
      levels[i] = levels[i] + amount
      hold(st, amount)
    elseif alg == LEASES then
      if amount > 0 then
        -- All leases on a key share its period, so the newest expires
        -- last and sets the key's PX.
        call('ZADD', st.key, format('%d', now + st.period), member)
        call('PEXPIRE', st.key, px(st.period))
      end
      levels[i] = levels[i] + amount
      st.hs = levels[i]
    else
      if alg == SLIDING then
        slot_add(st, st.cur, amount)
      else
        st.u, st.dirty = st.u + amount, true
      end
      levels[i] = levels[i] + amount
      hold(st, amount)
    end
    if levels[i] ~= SKIPPED then helds[i] = st.hs end
  end
  save(n)
  -- After the levels and the held, the borns, if any counter was reset,
  -- then the start of each lifetime item's run, in order (0 for an
  -- optional one left uncharged, whose state follows).
  for i = 1, n do levels[n + i] = helds[i] end
  local k = 2 * n
  local code = 1
  if reset then
    code = 5
    for i = 1, n do levels[k + i] = sts[i].born end
    k = k + n
  end
  for i = 1, n do
    local st = sts[i]
    if st.alg == LIFETIME then
      k = k + 1
      if levels[i] == SKIPPED then levels[k] = 0 else levels[k] = st.w end
    end
  end
  if not skipped then
    return spack(FMT[2 + k] or fmt(2 + k), code, now, unpack(levels, 1, k))
  end
  -- Then what a rejection gives for each optional item left uncharged.
  local r = { code + 1, now, unpack(levels, 1, k) }
  for j = 1, #why do r[#r + 1] = why[j] end
  return spack(fmt(#r), unpack(r))
end

-- fast_settle is settle_call's loop for what nearly every settlement is:
-- items on distinct keys, each a fixed window or calendar month in the
-- window it was charged in (or an extra charge on the window a key
-- holds), a token bucket whose key's expiry need not move, or a sliding
-- window corrected in a slot it keeps; t is when the reservation was
-- made. An item whose epoch is not its counter's born changes nothing.
-- Like fast_reserve, it plans every item's write (see flush)
-- before making any, gives up (false, having written nothing) on
-- anything else, and follows the general path's arithmetic (state,
-- settle, save): what the reservation held comes out of its piece, in
-- place.
local function fast_settle(keys, vals, arg, n, t)
  if not distinct(keys, n) then return false end
  local pos = 1
  for i = 1, n do
    local alg, limit, cap, period, delta, mark, reserved, epoch
    alg, limit, cap, period, delta, mark, reserved, epoch, pos = sunpack(ITEM8, arg, pos)
    local val = vals[i]
    wkind[i] = 0
    if alg == LEASES or alg == LIFETIME then
      -- Leases and lifetime budgets take the general path.
      return false
    elseif not val then
      -- Nothing held; a refund is dropped, an extra charge makes a new
      -- counter, the general way.
      if delta > 0 and epoch == 0 then return false end
    elseif alg == BUCKET then
      local x, at, keep, born, p1, a1
      if #val >= 48 then
        x, at, keep, born, p1, a1 = sunpack('<dddddd', val)
      elseif #val > 24 then
        x, at, keep, born = sunpack('<dddd', val)
      else
        x, at, keep = sunpack('<ddd', val)
        born = 0
      end
      if epoch == born then
        -- The piece: the newest, as a settlement's nearly always is, or
        -- another (written as far as it).
        local pt, q, a = piece(BUCKET, period, t), nil, nil
        if reserved > 0 and p1 then
          if p1 == pt then
            q, a = 33, a1
          else
            q = piece_at(val, 49, (#val - 48) / 16, pt)
            if q then a = sunpack('<d', val, q + 8) end
          end
          if q then
            a = a - reserved
            if a < 0 then a = 0 end
          end
        end
        if delta ~= 0 then
          local rate = limit / period
          if stale(x, at, cap, rate) then x, at = cap, now end
          if now > at then
            x = x + (now - at) * rate
            if x > cap then x = cap end
            at = now
          end
          x = x - delta
          if x > cap then x = cap end
          local hold = born_until(born)
          if p1 and expiry(p1) > hold then hold = expiry(p1) end
          local kind, v = bucket_value(x, at, keep, false, cap, rate, period, hold)
          -- A key whose expiry moves, or goes: the general path.
          if kind ~= RANGE then return false end
          if q == 33 then
            v = spack('<dddddd', x, at, keep, born, p1, a)
          elseif q then
            v = v .. sub(val, 25, q + 7) .. spack('<d', a)
          end
          wkind[i], wval[i] = RANGE, v
        elseif q then
          wkind[i], wval[i] = RANGE, sub(val, 1, q + 7) .. spack('<d', a)
        end
      end
    elseif alg == SLIDING then
      local sn, total, head, k, born, p1, a1
      if #val >= 56 then
        sn, total, head, k, born, p1, a1 = sunpack('<ddddddd', val)
      else
        sn, total, head, k, born = sunpack('<ddddd', val)
      end
      if epoch == born then
        local v, hi = val, 0
        local pt, q = piece(SLIDING, period, t), nil
        if reserved > 0 and k > 0 then
          if p1 == pt then q = 41 else q = piece_at(val, 57, k - 1, pt) end
        end
        if q then
          local a = a1
          if q ~= 41 then a = sunpack('<d', val, q + 8) end
          a = a - reserved
          if a < 0 then a = 0 end
          v, hi = patch(v, q + 8, spack('<d', a)), q + 15
        end
        local cur = now / period
        cur = cur - cur % 1
        local target = mark
        if mark < cur - SLOTS then
          -- The booked slot has left the window: an extra charge lands on
          -- the current one, a refund is dropped.
          target = cur
        end
        if delta ~= 0 and (mark >= cur - SLOTS or delta > 0) then
          if sn == target then
            local h = head + delta
            if h < 0 then h = 0 end
            v = patch(v, 1, spack('<ddd', sn, total + (h - head), h))
            if hi < 24 then hi = 24 end
          elseif sn > target then
            -- An older slot (a request that outlasted its slot, while
            -- others moved the window on): the total and that slot change,
            -- in place, unless it is the oldest one kept and becomes
            -- zero, which save would drop.
            local so = 41 + 16 * k
            local m = 1 + (#val - so + 1) / 8
            local j = sn - target + 1
            if j > m then return false end
            local at = so + 8 * (j - 2)
            local x = sunpack('<d', val, at)
            local y = x + delta
            if y < 0 then y = 0 end
            if y <= 0 and j == m then return false end
            v = patch(patch(v, 1, spack('<dd', sn, total + (y - x))), at, spack('<d', y))
            if hi < at + 7 then hi = at + 7 end
          else
            return false
          end
        end
        if hi > 0 then wkind[i], wval[i] = RANGE, sub(v, 1, hi) end
      end
    else
      local w, u, born, p1, a1
      if #val >= 40 then
        w, u, born, p1, a1 = sunpack('<ddddd', val)
      elseif #val > 16 then
        w, u, born = sunpack('<ddd', val)
      else
        w, u = sunpack('<dd', val)
        born = 0
      end
      if epoch == born then
        local idx = window(alg, period, now)
        if mark == idx and w == idx then
          u = u + delta
          if u < 0 then u = 0 end
          -- The piece: the newest, as a settlement's nearly always is, or
          -- another (written as far as it).
          local pt, q = piece(alg, period, t), nil
          if reserved > 0 and p1 then
            if p1 == pt then q = 25 else q = piece_at(val, 41, (#val - 40) / 16, pt) end
          end
          if q == 25 then
            a1 = a1 - reserved
            if a1 < 0 then a1 = 0 end
            wkind[i], wval[i] = RANGE, spack('<ddddd', idx, u, born, p1, a1)
          elseif q then
            local a = sunpack('<d', val, q + 8) - reserved
            if a < 0 then a = 0 end
            wkind[i], wval[i] = RANGE, spack('<dd', idx, u) .. sub(val, 17, q + 7) .. spack('<d', a)
          elseif delta ~= 0 then
            wkind[i], wval[i] = RANGE, spack('<dd', idx, u)
          end
        elseif delta > 0 then
          -- An extra charge on the current window: a new one is the
          -- general path's.
          if w ~= idx then return false end
          wkind[i], wval[i] = RANGE, spack('<dd', idx, u + delta)
        end
      end
    end
  end
  flush(keys, n)
  return true
end

-- settle_call (tw_settle): KEYS are the counters to correct, then the
-- record key; ARGV[2] packs eight doubles per item: algorithm code,
-- limit, capacity, period (as for tw_reserve), delta (actual minus
-- reserved), mark, reserved and epoch (the counter's born at the
-- reservation: an item whose counter was reset since changes nothing).
--
-- Applies only if the reservation's record exists, and deletes it in the
-- same step, so that a repeated settlement is a no-op. Returns 1 when it
-- applied, 0 when there was no record.
local function settle_call(keys, args)
  if not call then init() end
  setclock(args[1])
  setzones(args[3])
  local n = count(args[2], 8)
  local rkey = keys[n + 1]
  member = rkey
  local rec = call('GETDEL', rkey)
  local t = record(rec)
  if t == nil then return 0 end
  if t < 0 then
    -- A tombstone (no settlement follows a release): keep it.
    call('SET', rkey, rec, 'PX', RECORD_PX)
    return 0
  end
  local vals = load(keys, n)
  if fast and fast_settle(keys, vals, args[2], n, t) then return 1 end
  local v = items(args[2], 8)
  for i = 1, n do
    local b = 8 * i - 8
    local st = state(keys, vals, i, v[b + 1], v[b + 2], v[b + 3], v[b + 4])
    if st.alg == LEASES or v[b + 8] == st.born then settle(st, v[b + 5], v[b + 6], v[b + 7], t) end
  end
  save(n)
  return 1
end

-- release (tw_release): KEYS and ARGV as for tw_reserve. Undoes a
-- reservation whose outcome its caller does not know: if its record
-- exists, every item's amount is refunded where the reservation booked it
-- and the record is deleted (returns 1); otherwise a tombstone is left, so
-- that the reservation charges nothing if it arrives later (returns 0).
-- A counter reset since the reservation was made (born after its time)
-- gets nothing back.
local function release(keys, args)
  if not call then init() end
  setclock(args[1])
  setzones(args[3])
  local v, n = items(args[2], 5)
  local rkey = keys[n + 1]
  member = rkey
  local raw = call('GET', rkey)
  local t = record(raw)
  if t ~= nil and t < 0 then return 0 end
  if t == nil then
    call('SET', rkey, spack('<d', -now), 'PX', RECORD_PX)
    return 0
  end
  call('DEL', rkey)
  -- The optional items the reservation left uncharged: nothing to refund.
  local skip = {}
  if #raw > 8 then
    local r = { sunpack(fmt(#raw / 8), raw) }
    for j = 2, #raw / 8 do skip[r[j]] = true end
  end
  local vals = load(keys, n)
  for i = 1, n do
    local b = 5 * i - 5
    local alg, period = v[b + 1], v[b + 4]
    if alg >= OPTIONAL then alg = alg - OPTIONAL end
    local st = state(keys, vals, i, alg, v[b + 2], v[b + 3], period)
    -- The mark the reservation got: its window or slot at time t.
    local mark = 0
    if alg == SLIDING then
      mark = floor(t / period)
    elseif alg == LIFETIME then
      -- The run it was charged to, if that is still the one.
      mark = st.w
    elseif alg ~= BUCKET and alg ~= LEASES then
      mark = window(alg, period, t)
    end
    local amount = v[b + 5]
    if not skip[i] and amount ~= 0 and (alg == LEASES or t >= st.born) then settle(st, -amount, mark, amount, t) end
  end
  save(n)
  return 1
end

-- peek (tw_peek): KEYS are counters; ARGV[2] packs four doubles per
-- counter: algorithm code, limit, capacity and period, and ARGV[3] the
-- zoned ones' boundaries (as for tw_reserve).
-- It reads each counter as a reservation of nothing would (explain with
-- amount 0) and writes nothing: a counter of leases is counted, not
-- trimmed (ZCOUNT of the leases expiring after now, as level would leave
-- them). Returns packed doubles, per counter its remaining and reset µs.
local function peek(keys, args)
  if not call then init() end
  setclock(args[1])
  setzones(args[3])
  local v, n = items(args[2], 4)
  local vals = load(keys, n)
  local r = {}
  for i = 1, n do
    local b = 4 * i - 4
    local st = state(keys, vals, i, v[b + 1], v[b + 2], v[b + 3], v[b + 4])
    if st.alg == LEASES then
      st.u = call('ZCOUNT', st.key, '(' .. format('%d', now), '+inf')
    end
    r[2 * i - 1], r[2 * i] = explain(st, 0)
  end
  return spack(FMT[2 * n] or fmt(2 * n), unpack(r, 1, 2 * n))
end

-- hold (tw_hold): KEYS are the records of a hold (one per slot its
-- counters fall in), ARGV[2] its TTL (µs). Each is written as a
-- reservation's record dated ahead (accounting.RecordDated), so that
-- record() counts it, and tw_settle applies to it once, until the TTL
-- has passed on the store's clock (rounded down to a GRAIN, as
-- accounting.HoldExpiry); PX reclaims it then on Redis's.
local function hold(keys, args)
  if not call then init() end
  setclock(args[1])
  local ttl = tonumber(args[2])
  local ends = now + ttl
  ends = ends - ends % GRAIN
  local soonest = now - now % GRAIN + GRAIN
  if ends < soonest then ends = soonest end
  local rec = spack('<d', ends - GRAIN - RECORD_TTL)
  local ms = px(ends - now)
  for i = 1, #keys do
    call('SET', keys[i], rec, 'PX', ms)
  end
  return 1
end

-- reset (tw_reset): KEYS[1] is a counter, ARGV[2] packs its four
-- doubles (as tw_peek's) and ARGV[3] its zone's boundaries. The counter
-- starts afresh, born just after now (and after its last born): what it
-- held is gone, and a reservation made before changes nothing on it
-- when it settles or is released, for as long as its key keeps born
-- (RESET_KEPT). A counter of leases is deleted, its leases with it.
-- Returns 1 if the counter held any usage (what tw_peek reads), 0 if
-- not.
local function reset(keys, args)
  if not call then init() end
  setclock(args[1])
  setzones(args[3])
  local v = items(args[2], 4)
  local alg, limit, cap, period = v[1], v[2], v[3], v[4]
  if alg == LEASES then
    local held = call('ZCOUNT', keys[1], '(' .. format('%d', now), '+inf')
    call('DEL', keys[1])
    if held > 0 then return 1 end
    return 0
  end
  local val = load(keys, 1)[1]
  local st = state(keys, { val }, 1, alg, limit, cap, period)
  local existed = cap - explain(st, 0) > 0
  local born = now + 1
  if st.born >= born then born = st.born + 1 end
  -- A state that reads as fresh, to this version and earlier ones.
  local fresh
  if alg == SLIDING then
    fresh = spack('<ddddd', 0, 0, 0, 0, born)
  elseif alg == BUCKET then
    fresh = spack('<dddd', cap, now, now + RESET_KEPT, born)
  else
    fresh = spack('<ddd', -1, 0, born)
  end
  call('SET', keys[1], fresh, 'PX', px(born + RESET_KEPT - now))
  if existed then return 1 end
  return 0
end

redis.register_function('tw_reserve_' .. V, reserve)
redis.register_function('tw_settle_' .. V, settle_call)
redis.register_function('tw_release_' .. V, release)
redis.register_function('tw_hold_' .. V, hold)
redis.register_function('tw_reset_' .. V, reset)
redis.register_function{function_name = 'tw_peek_' .. V, callback = peek, flags = { 'no-writes' }}
