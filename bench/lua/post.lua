-- wrk script for the orgate gateway benchmark.
--
-- Usage: wrk ... -s post.lua <url> -- <body-file> [authorization-header-value]
--
-- Every request is a POST of the body file's bytes with Content-Type
-- application/json. At the end one line is printed to stdout:
--   BENCH_RESULT {json}
-- with the request count, duration, error counts (status = non-2xx/3xx
-- responses) and latency percentiles in microseconds, so that the driver
-- does not have to parse wrk's human-readable report.

local body_file = nil
local authorization = nil

local function read_file(path)
   local f = assert(io.open(path, "rb"))
   local data = f:read("*a")
   f:close()
   return data
end

function init(args)
   body_file = args[1]
   authorization = args[2]
   wrk.method = "POST"
   wrk.body = read_file(body_file)
   wrk.headers["Content-Type"] = "application/json"
   if authorization ~= nil and authorization ~= "" then
      wrk.headers["Authorization"] = authorization
   end
end

function done(summary, latency, requests)
   local e = summary.errors
   local p = function(q) return latency:percentile(q) end
   io.write(string.format(
      "BENCH_RESULT {\"requests\":%d,\"duration_us\":%d,\"bytes\":%d," ..
      "\"errors\":{\"connect\":%d,\"read\":%d,\"write\":%d,\"status\":%d,\"timeout\":%d}," ..
      "\"latency_us\":{\"min\":%d,\"mean\":%.1f,\"p50\":%d,\"p90\":%d,\"p99\":%d,\"max\":%d}}\n",
      summary.requests, summary.duration, summary.bytes,
      e.connect, e.read, e.write, e.status, e.timeout,
      latency.min, latency.mean, p(50), p(90), p(99), latency.max))
end
