-- Keyed posts for wrk: every request carries its own Idempotency-Key (docs/api.md).
--
-- wrk -s bench/wrk/post.lua URL -- MODE TOKEN ROOMS PREFIX NKEYS NTHREADS
--   MODE      unique | seed | replay
--               unique: a fresh key per request ("PREFIX-<thread>-<n>"), the room spread
--                       over ROOMS by a hash of (thread, n), so a checker can redo it
--               seed:   keys "PREFIX-0" .. "PREFIX-(NKEYS-1)", each posted once, the room
--                       fixed by the key's number; the thread stops itself when it has
--                       had a 201 for each of its keys (prints SEED_DONE on stderr)
--               replay: cycles over the seeded keys with the same bodies, so every answer
--                       should be a replay
--   TOKEN     member bearer token
--   ROOMS     comma-separated room ids
--   NKEYS     number of seeded keys (seed, replay)
--   NTHREADS  the -t given to wrk (threads take interleaved key numbers)
-- The body's text names the key, so a duplicate event would show as a repeated text.
-- done() prints one line "WRK_JSON {...}" with counts and latency percentiles (ms);
-- sent_per_thread[t] is how many requests thread t made (keys n = 0 .. sent-1), some of
-- which may still have been in flight when wrk stopped.

local threads = {}
local next_tid = 0

function setup(thread)
  thread:set("tid", next_tid)
  next_tid = next_tid + 1
  table.insert(threads, thread)
end

function init(args)
  mode = args[1]
  token = args[2]
  rooms = {}
  for r in string.gmatch(args[3], "[^,]+") do
    rooms[#rooms + 1] = r
  end
  prefix = args[4]
  nkeys = tonumber(args[5] or "0")
  nthreads = tonumber(args[6] or "1")
  n = 0
  created, replayed, other2xx, non2xx = 0, 0, 0, 0
  statuses = ""
  stopped = false
  -- how many keys this thread seeds: key numbers tid, tid + nthreads, ...
  quota = 0
  if nkeys > tid then
    quota = math.floor((nkeys - 1 - tid) / nthreads) + 1
  end
end

local function post(key, room)
  return wrk.format("POST", "/v1/rooms/" .. room .. "/messages", {
    ["Content-Type"] = "application/json",
    ["Authorization"] = "Bearer " .. token,
    ["Idempotency-Key"] = key,
  }, '{"text":"bench ' .. key .. '"}')
end

local function numbered(i)
  return post(prefix .. "-" .. i, rooms[(i % #rooms) + 1])
end

function request()
  local i = n
  n = n + 1
  if mode == "unique" then
    return post(prefix .. "-" .. tid .. "-" .. i, rooms[((i * 7919 + tid * 104729) % #rooms) + 1])
  elseif mode == "seed" then
    if quota == 0 then
      return numbered(0)  -- nothing to seed here: nkeys < threads (the caller avoids it)
    elseif i >= quota then
      -- past this thread's quota: replay its own keys (no new events) until it stops
      i = i % quota
    end
    return numbered(tid + nthreads * i)
  else
    return numbered((tid + nthreads * i) % nkeys)
  end
end

function response(status, headers, body)
  if status >= 200 and status < 300 then
    local s = headers["Idempotency-Status"] or headers["idempotency-status"]
    if s == "created" then
      created = created + 1
    elseif s == "replayed" then
      replayed = replayed + 1
    else
      other2xx = other2xx + 1
    end
  else
    non2xx = non2xx + 1
    if #statuses < 200 then
      statuses = statuses .. status .. ","
    end
  end
  if mode == "seed" and not stopped and created + non2xx >= quota then
    stopped = true
    io.stderr:write("SEED_DONE " .. tid .. "\n")
    io.stderr:flush()
  end
end

function done(summary, latency, requests)
  local c, r, o, x, st, sent = 0, 0, 0, 0, "", ""
  for _, t in ipairs(threads) do
    sent = sent .. (sent == "" and "" or ",") .. t:get("n")
    c = c + t:get("created")
    r = r + t:get("replayed")
    o = o + t:get("other2xx")
    x = x + t:get("non2xx")
    st = st .. t:get("statuses")
  end
  local e = summary.errors
  io.write(string.format(
    'WRK_JSON {"requests":%d,"duration_s":%.3f,"bytes":%d,' ..
    '"sent_per_thread":[%s],"created":%d,"replayed":%d,"other_2xx":%d,"non_2xx":%d,"non_2xx_statuses":"%s",' ..
    '"socket_errors":{"connect":%d,"read":%d,"write":%d,"timeout":%d},' ..
    '"latency_ms":{"p50":%.3f,"p90":%.3f,"p99":%.3f,"p999":%.3f,"max":%.3f,"mean":%.3f}}\n',
    summary.requests, summary.duration / 1e6, summary.bytes,
    sent, c, r, o, x, st,
    e.connect, e.read, e.write, e.timeout,
    latency:percentile(50) / 1000, latency:percentile(90) / 1000,
    latency:percentile(99) / 1000, latency:percentile(99.9) / 1000,
    latency.max / 1000, latency.mean / 1000))
end
