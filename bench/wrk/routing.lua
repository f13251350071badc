-- Keyed posts that route (docs/delegation.md), for bench/routing_path.py: a room of 2 people
-- (h0, h1) and 10 agents (ag0..ag9), each request from one member's token, each with its
-- own Idempotency-Key.
--
-- wrk -t 1 -s bench/wrk/routing.lua URL -- MODE TOKENS ROOM PREFIX PLANFILE OFFSET
--   MODE      plain:  h0 posts a text with no mention (the sole-agent router runs and,
--                     with 10 agents in the room, wakes no one)
--             routed: request n follows line ((OFFSET + n) mod lines) + 1 of PLANFILE, which
--                     routing_path.py draws (seeded): 40 % a person mentions 1-2 agents,
--                     30 % an agent delegates ("@agY do …", a marked E1), 30 % the
--                     delegate of a pooled E1 reports back ({"text", "in_reply_to": E1,
--                     "reply_kind": "result"}; some of them duplicates)
--   TOKENS    12 comma-separated bearer tokens, in the order h0,h1,ag0..ag9
--   ROOM      room id
--   PREFIX    key prefix; keys are "PREFIX-<thread>-<n>" and every text starts "KEY: "
--   PLANFILE  (routed) one request a line: "<token index, 1-based> <rest>", the body
--             being '{"text":"' .. KEY .. rest (routing_path.py also seeds the pool of
--             E1s with a plan of delegations only)
--   OFFSET    (routed) where in the plan this run starts (0)
-- routing_path.py rebuilds any request from its (thread, n) and the plan, so a checker
-- can retry what was in flight when wrk stopped.
-- done() prints one line "WRK_JSON {...}" with counts and latency percentiles (ms), in the
-- same shape as bench/wrk/post.lua.

local threads = {}
local next_tid = 0

function setup(thread)
  thread:set("tid", next_tid)
  next_tid = next_tid + 1
  table.insert(threads, thread)
end

function init(args)
  mode = args[1]
  tokens = {}
  for t in string.gmatch(args[2], "[^,]+") do
    tokens[#tokens + 1] = t
  end
  path = "/v1/rooms/" .. args[3] .. "/messages"
  prefix = args[4]
  plan_sender, plan_rest = {}, {}
  if mode == "routed" then
    for line in io.lines(args[5]) do
      local who, rest = string.match(line, "^(%d+) (.*)$")
      if who then
        plan_sender[#plan_sender + 1] = tonumber(who)
        plan_rest[#plan_rest + 1] = rest
      end
    end
  end
  nplan = #plan_rest
  offset = tonumber(args[6] or "0")
  n = 0
  created, replayed, other2xx, non2xx = 0, 0, 0, 0
  statuses = ""
end

local function post(token, key, body)
  return wrk.format("POST", path, {
    ["Content-Type"] = "application/json",
    ["Authorization"] = "Bearer " .. token,
    ["Idempotency-Key"] = key,
  }, body)
end

function request()
  local i = n
  n = n + 1
  local key = prefix .. "-" .. tid .. "-" .. i
  if mode == "plain" then
    return post(tokens[1], key, '{"text":"' .. key .. ': status update, nothing to route"}')
  end
  local j = ((offset + i) % nplan) + 1
  return post(tokens[plan_sender[j]], key, '{"text":"' .. key .. plan_rest[j])
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
