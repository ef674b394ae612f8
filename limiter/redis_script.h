// The Lua script that decides checks' limits inside Redis, atomically: the same definitions as
// algorithm.cc (same integer arithmetic, exact in Lua's doubles below 2^53), dry-running every
// limit of a check and committing only if every enforced one admits. One call decides several
// checks (a pipelined batch of them) one after the other, as separate calls would: Redis pays
// a script call once for the batch.
//
// KEYS: the state keys of every check's limits, check after check. ARGV[1]: the deadline in
// Redis's own clock (Unix µs; 0: none); ARGV[2]: the number of checks; then per check: now
// (Unix ms), its number of limits, and seven per limit: algorithm (the Algorithm enum's
// number), limit, window_ms, max_wait_ms, cost, shadow (0/1), debt (units the front door
// admitted on its own while Redis was unreachable, charged first as algorithm.h's Charge
// does). A cost of 0 decides nothing (allowed, all else 0): the check only charges.
// Returns five integers per limit, check after check: allowed (0/1), remaining,
// retry_after_ms, reset_ms, delay_ms; or the single integer -1, having changed nothing, when
// it runs after the deadline (the callers have stopped waiting and decided without Redis:
// counting the checks here too would count them twice).
#ifndef TWEETSEARCH_LIMITER_REDIS_SCRIPT_H_
#define TWEETSEARCH_LIMITER_REDIS_SCRIPT_H_

namespace tweetsearch::limiter {

inline constexpr char kDecideScript[] = R"lua(
local now = 0  -- the current check's
local deadline = tonumber(ARGV[1])
if deadline > 0 then
  local t = redis.call('TIME')
  if tonumber(t[1]) * 1000000 + tonumber(t[2]) > deadline then return {-1} end
end
local function num(x) return string.format('%.0f', x) end
local function ceil_div(a, b) if a <= 0 then return 0 end return math.floor((a + b - 1) / b) end

local function bucket(key, L, W, cost, meter)
  local cap, need = L * W, cost * W
  local st = redis.call('HMGET', key, 'a', 'u')
  local started = st[1] ~= false
  local tokens = cap
  local updated = now
  if started then
    local a = tonumber(st[1])
    updated = tonumber(st[2])
    if meter then tokens = cap - a else tokens = a end
  end
  local elapsed = 0
  if started then elapsed = math.min(math.max(now - updated, 0), W) end
  tokens = math.min(cap, tokens + elapsed * L)
  local r = {0, 0, 0, 0, 0}
  if cost <= L and tokens >= need then
    r[1] = 1
    tokens = tokens - need
    local u = now
    if started then u = math.max(now, updated) end
    local stored = tokens
    if meter then stored = cap - tokens end
    r.commit = function()
      redis.call('HSET', key, 'a', num(stored), 'u', num(u))
      redis.call('PEXPIRE', key, 2 * W)
    end
  elseif cost > L then r[3] = W
  else r[3] = ceil_div(need - tokens, L) end
  r[2] = math.floor(tokens / W)
  r[4] = ceil_div(cap - tokens, L)
  return r
end

local function fixed(key, L, W, cost)
  local start = now - (now % W)
  local st = redis.call('HMGET', key, 's', 'c')
  local c = 0
  if st[1] ~= false and tonumber(st[1]) == start then c = tonumber(st[2]) end
  local r = {0, 0, 0, start + W - now, 0}
  if cost <= L and c + cost <= L then
    r[1] = 1
    c = c + cost
    r.commit = function()
      redis.call('HSET', key, 's', num(start), 'c', num(c))
      redis.call('PEXPIRE', key, start + W - now + 1000)
    end
  elseif cost > L then r[3] = W
  else r[3] = r[4] end
  r[2] = L - math.min(c, L)
  return r
end

local function counter(key, L, W, cost)
  local start = now - (now % W)
  local st = redis.call('HMGET', key, 's', 'c', 'p')
  local cur, prev = 0, 0
  if st[1] ~= false then
    local s = tonumber(st[1])
    if s == start then cur = tonumber(st[2]); prev = tonumber(st[3])
    elseif s + W == start then prev = tonumber(st[2]) end
  end
  local elapsed = now - start
  local estimate = prev * (W - elapsed) + cur * W
  local cap, need = L * W, cost * W
  local used = estimate
  local r = {0, 0, 0, 0, 0}
  if cost <= L and estimate + need <= cap then
    r[1] = 1
    cur = cur + cost
    used = used + need
    r.commit = function()
      redis.call('HSET', key, 's', num(start), 'c', num(cur), 'p', num(prev))
      redis.call('PEXPIRE', key, 2 * W)
    end
  elseif cost > L then r[3] = W
  elseif cur + cost <= L and prev > 0 then
    local e = W - math.floor((cap - (cur + cost) * W) / prev)
    r[3] = math.max(1, e - elapsed)
  else
    local e = 0
    if cur > 0 then e = W - math.floor((cap - need) / cur) end
    r[3] = W - elapsed + math.max(0, e)
  end
  if used >= cap then r[2] = 0 else r[2] = math.floor((cap - used) / W) end
  if cur > 0 then r[4] = 2 * W - elapsed elseif prev > 0 then r[4] = W - elapsed end
  return r
end

-- The log is a sorted set of "seq:cost" members scored by time, beside a hash holding the
-- running total of their costs ('t') and the sequence ('n'). Every call is O(log n) plus the
-- entries it expires: it reads the total, not the set, and a refusal reads only the oldest
-- entries that must expire before the request fits (each costs at least 1).
local function cost_of(member) return tonumber(string.match(member, ':(%d+)$')) end

-- Appends an entry of `cost` at now to a log whose entries cost `total`.
local function append_log(key, hkey, W, cost, total)
  local seq = redis.call('HINCRBY', hkey, 'n', 1)
  redis.call('HSET', hkey, 't', num(total + cost))
  redis.call('ZADD', key, num(now), num(seq) .. ':' .. num(cost))
  redis.call('PEXPIRE', key, W)
  redis.call('PEXPIRE', hkey, W)
end

local function log(key, L, W, cost)
  local hkey = key .. ':h'
  local expired = redis.call('ZRANGEBYSCORE', key, '-inf', num(now - W))
  local t = redis.call('HGET', hkey, 't')
  local total = 0
  if t then
    total = tonumber(t)
    for i = 1, #expired do total = total - cost_of(expired[i]) end
  end
  if #expired > 0 then
    redis.call('ZREMRANGEBYSCORE', key, '-inf', num(now - W))
    if t then redis.call('HSET', hkey, 't', num(total)) end
  end
  if not t then  -- no total kept (a log written by an older script): count the set once
    local members = redis.call('ZRANGE', key, 0, -1)
    for i = 1, #members do total = total + cost_of(members[i]) end
  end
  local newest = redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')
  local r = {0, 0, 0, 0, 0}
  if cost <= L and total + cost <= L then
    r[1] = 1
    r.commit = function()
      if not t then  -- an older script kept the sequence apart
        local n = redis.call('GET', key .. ':n')
        if n then redis.call('HSET', hkey, 'n', n) end
      end
      append_log(key, hkey, W, cost, total)
    end
  elseif cost > L then r[3] = W
  else
    local oldest = redis.call('ZRANGE', key, 0, total + cost - L - 1, 'WITHSCORES')
    local left = total
    for i = 1, #oldest, 2 do
      left = left - cost_of(oldest[i])
      if left + cost <= L then r[3] = math.max(1, tonumber(oldest[i + 1]) + W - now); break end
    end
  end
  local counted = total
  if r[1] == 1 then counted = total + cost end
  r[2] = L - math.min(counted, L)
  if #newest > 0 then r[4] = tonumber(newest[2]) + W - now end
  return r
end

local function gcra(key, L, W, cost)
  local nowus, win = now * 1000, W * 1000
  local T = math.max(1, math.floor(win / L))
  local tat = math.max(tonumber(redis.call('GET', key) or '0'), nowus)
  local new_tat = tat + cost * T
  local after = tat
  local r = {0, 0, 0, 0, 0}
  if cost <= L and new_tat - nowus <= win then
    r[1] = 1
    after = new_tat
    r.commit = function()
      redis.call('SET', key, num(new_tat), 'PX', math.floor((new_tat - nowus) / 1000) + 1000)
    end
  elseif cost > L then r[3] = W
  else r[3] = ceil_div(new_tat - nowus - win, 1000) end
  r[2] = math.min(L, math.max(0, math.floor((nowus + win - after) / T)))
  r[4] = ceil_div(after - nowus, 1000)
  return r
end

local function queue(key, L, W, max_wait, cost)
  local nowus, wait = now * 1000, max_wait * 1000
  local T = math.max(1, math.floor(W * 1000 / L))
  local slot = math.max(tonumber(redis.call('GET', key) or '0'), nowus)
  local nxt = slot
  local r = {0, 0, 0, 0, 0}
  if cost <= L and slot - nowus <= wait then
    r[1] = 1
    r[5] = ceil_div(slot - nowus, 1000)
    nxt = slot + cost * T
    r.commit = function()
      redis.call('SET', key, num(nxt), 'PX', math.floor((nxt - nowus) / 1000) + 1000)
    end
  elseif cost > L then r[3] = W
  else r[3] = ceil_div(slot - nowus - wait, 1000) end
  local room = nowus + wait - nxt
  if room < 0 then r[2] = 0 else r[2] = math.min(L, math.floor(room / T) + 1) end
  r[4] = ceil_div(nxt - nowus, 1000)
  return r
end

-- Charges (algorithm.cc's Charge): units admitted elsewhere, counted as if admitted now,
-- never beyond the fullest state the algorithm reaches by itself.
local function charge_bucket(key, L, W, units, meter)
  local cap = L * W
  local st = redis.call('HMGET', key, 'a', 'u')
  local tokens, u = cap, now
  if st[1] ~= false then
    local a = tonumber(st[1])
    u = math.max(now, tonumber(st[2]))
    if meter then tokens = cap - a else tokens = a end
    tokens = math.min(cap, tokens + math.min(math.max(now - tonumber(st[2]), 0), W) * L)
  end
  tokens = math.max(0, tokens - math.min(units, math.floor(tokens / W) + 1) * W)
  local stored = tokens
  if meter then stored = cap - tokens end
  redis.call('HSET', key, 'a', num(stored), 'u', num(u))
  redis.call('PEXPIRE', key, 2 * W)
end

local function charge_window(key, L, W, units, ttl)
  local start = now - (now % W)
  local st = redis.call('HMGET', key, 's', 'c', 'p')
  local cur, prev = 0, 0
  if st[1] ~= false then
    local s = tonumber(st[1])
    if s == start then cur = tonumber(st[2]); prev = tonumber(st[3] or '0')
    elseif s + W == start then prev = tonumber(st[2]) end
  end
  cur = math.min(L, cur + units)
  redis.call('HSET', key, 's', num(start), 'c', num(cur), 'p', num(prev))
  redis.call('PEXPIRE', key, ttl)
end

local function charge_log(key, L, W, units)
  log(key, L, W, L + 1)  -- expires what no longer counts (a cost above the limit commits nothing)
  local hkey = key .. ':h'
  local total = tonumber(redis.call('HGET', hkey, 't') or '0')
  -- every unit, even beyond the limit
  append_log(key, hkey, W, math.min(units, 1073741824), total)
end

local function charge_tat(key, L, W, units, ahead)
  local nowus = now * 1000
  local T = math.max(1, math.floor(W * 1000 / L))
  local tat = math.max(tonumber(redis.call('GET', key) or '0'), nowus)
  local t = math.max(tat, math.min(nowus + ahead * 1000, tat + math.min(units, L) * T))
  redis.call('SET', key, num(t), 'PX', math.floor((t - nowus) / 1000) + 1000)
end

local function charge(key, algo, L, W, max_wait, units)
  if algo == 0 or algo == 1 then charge_bucket(key, L, W, units, algo == 1)
  elseif algo == 2 then charge_tat(key, L, W, units, W + max_wait)
  elseif algo == 3 then charge_window(key, L, W, units, now - (now % W) + W - now + 1000)
  elseif algo == 4 then charge_log(key, L, W, units)
  elseif algo == 5 then charge_window(key, L, W, units, 2 * W)
  else charge_tat(key, L, W, units, W) end
end

-- Decides one check: its limits are KEYS[k0 + i] and ARGV[a + 7 (i - 1) + 1 ..+ 7] (i = 1..n).
local function decide(k0, a, n, out)
  for i = 1, n do
    local b = a + (i - 1) * 7
    local debt = tonumber(ARGV[b + 7])
    if debt > 0 then
      charge(KEYS[k0 + i], tonumber(ARGV[b + 1]), tonumber(ARGV[b + 2]), tonumber(ARGV[b + 3]),
             tonumber(ARGV[b + 4]), debt)
    end
  end
  local results, all = {}, true
  for i = 1, n do
    local b = a + (i - 1) * 7
    local algo, L, W = tonumber(ARGV[b + 1]), tonumber(ARGV[b + 2]), tonumber(ARGV[b + 3])
    local max_wait, cost, shadow = tonumber(ARGV[b + 4]), tonumber(ARGV[b + 5]), ARGV[b + 6] == '1'
    local key = KEYS[k0 + i]
    local r
    if cost == 0 then r = {1, 0, 0, 0, 0}  -- a check that only charges debts decides nothing
    elseif algo == 0 then r = bucket(key, L, W, cost, false)
    elseif algo == 1 then r = bucket(key, L, W, cost, true)
    elseif algo == 2 then r = queue(key, L, W, max_wait, cost)
    elseif algo == 3 then r = fixed(key, L, W, cost)
    elseif algo == 4 then r = log(key, L, W, cost)
    elseif algo == 5 then r = counter(key, L, W, cost)
    else r = gcra(key, L, W, cost) end
    results[i] = r
    if r[1] == 0 and not shadow then all = false end
  end
  for i = 1, n do
    local r = results[i]
    if all and r[1] == 1 and r.commit then r.commit() end
    for k = 1, 5 do out[#out + 1] = r[k] end
  end
end

local out = {}
local k0, a = 0, 3
for _ = 1, tonumber(ARGV[2]) do
  now = tonumber(ARGV[a])
  local n = tonumber(ARGV[a + 1])
  decide(k0, a + 1, n, out)
  k0 = k0 + n
  a = a + 2 + 7 * n
end
return out
)lua";

}  // namespace tweetsearch::limiter

#endif  // TWEETSEARCH_LIMITER_REDIS_SCRIPT_H_
