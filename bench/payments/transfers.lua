-- wrk script: POST /transfers between two of ACCOUNTS accounts (a1 .. aN) chosen
-- at random, 1 cent each, every request with an Idempotency-Key of its own; or,
-- with "balance", GET /accounts/a1, the service's own read, as the ceiling.
--   wrk -s bench/payments/transfers.lua URL -- ROUND [close|keep-alive] [balance]
-- ROUND keeps the keys of one round apart from another's; "close" sends
-- Connection: close (a new connection per request) instead of keeping it alive.
local accounts = tonumber(os.getenv("ACCOUNTS") or "1000")
local threads = 0

function setup(thread)
  threads = threads + 1
  thread:set("tid", threads)
end

function init(args)
  round = args[1] or "0"
  close = args[2] == "close"
  balance = args[3] == "balance"
  counter = 0
  math.randomseed(os.time() * 1000 + tid)
end

function request()
  if balance then
    local headers = {["Authorization"] = "Bearer bench"}
    if close then headers["Connection"] = "close" end
    return wrk.format("GET", "/accounts/a1", headers)
  end
  counter = counter + 1
  local from = math.random(1, accounts)
  local to = math.random(1, accounts - 1)
  if to >= from then to = to + 1 end
  local headers = {
    ["Content-Type"] = "application/json",
    ["Authorization"] = "Bearer bench",
    ["Idempotency-Key"] = "r" .. round .. "-t" .. tid .. "-" .. counter,
  }
  if close then headers["Connection"] = "close" end
  return wrk.format("POST", "/transfers", headers,
                    '{"from":"a' .. from .. '","to":"a' .. to .. '","amount":1}')
end

function done(summary, latency, requests)
  io.write(string.format('{"requests":%d,"seconds":%.3f,"non2xx":%d,"socket_errors":%d,"p50_ms":%.3f,"p99_ms":%.3f}\n',
    summary.requests, summary.duration / 1e6, summary.errors.status,
    summary.errors.connect + summary.errors.read + summary.errors.write + summary.errors.timeout,
    latency:percentile(50) / 1000, latency:percentile(99) / 1000))
end
