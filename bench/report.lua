-- Shared by every bench script (loaded with dofile): per-thread seeding, a word list for
-- request bodies, and a done() that prints one JSON line run.py parses.
local words_file = os.getenv("BENCH_WORDS")
bench_words = {}
if words_file then
  for line in io.lines(words_file) do bench_words[#bench_words + 1] = line end
end
bench_queries = {}
local queries_file = os.getenv("BENCH_QUERIES")
if queries_file then
  for line in io.lines(queries_file) do bench_queries[#bench_queries + 1] = line end
end
bench_max_id = tonumber(os.getenv("BENCH_MAX_ID") or "1")
bench_sessions = tonumber(os.getenv("BENCH_SESSIONS") or "1")

local counter = 0
function init(args)
  counter = counter + 1
  math.randomseed(os.time() + counter * 7919)
end

function bench_sentence(low, high)
  local n = math.random(low, high)
  local out = {}
  for i = 1, n do
    -- Square of a uniform draw: a cheap skew towards the common words at the list's head.
    local r = math.random()
    out[i] = bench_words[1 + math.floor(r * r * #bench_words)]
  end
  return table.concat(out, " ")
end

function bench_query()
  return bench_queries[math.random(1, #bench_queries)]
end

function bench_urlencode(s)
  return (s:gsub("[^%w%-_%.~]", function(c) return string.format("%%%02X", string.byte(c)) end))
end

function bench_json_string(s)
  return '"' .. s:gsub('[%c"\\]', function(c) return string.format("\\u%04x", string.byte(c)) end) .. '"'
end

function bench_post_episode()
  local body = '{"sessionId":' .. math.random(1, bench_sessions)
    .. ',"userMessage":' .. bench_json_string(bench_sentence(6, 24))
    .. ',"aiResponse":' .. bench_json_string(bench_sentence(12, 48)) .. '}'
  return wrk.format("POST", "/episodes", {["Content-Type"] = "application/json"}, body)
end

function bench_search_body()
  local body = '{"query":' .. bench_json_string(bench_query()) .. ',"limit":10}'
  return wrk.format("POST", "/search", {["Content-Type"] = "application/json"}, body)
end

function done(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    'BENCH_RESULT {"requests":%d,"duration_us":%d,"p50_us":%d,"p90_us":%d,"p99_us":%d,"max_us":%d,'
      .. '"mean_us":%.1f,"connect":%d,"read":%d,"write":%d,"status":%d,"timeout":%d}\n',
    summary.requests, summary.duration, latency:percentile(50), latency:percentile(90),
    latency:percentile(99), latency.max, latency.mean, e.connect, e.read, e.write, e.status, e.timeout))
end
