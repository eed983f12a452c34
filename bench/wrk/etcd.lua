-- etcd's JSON gateway for the suite's cross-check: a put or a range of a random preloaded key
-- (keys and values base64, as the gateway wants them). HIVEKV_BENCH_OP is "put" or "get".
local b64chars = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/'
local function b64(data)
  return ((data:gsub('.', function(x)
    local r, b = '', x:byte()
    for i = 8, 1, -1 do r = r .. (b % 2 ^ i - b % 2 ^ (i - 1) > 0 and '1' or '0') end
    return r
  end) .. '0000'):gsub('%d%d%d?%d?%d?%d?', function(x)
    if #x < 6 then return '' end
    local c = 0
    for i = 1, 6 do c = c + (x:sub(i, i) == '1' and 2 ^ (6 - i) or 0) end
    return b64chars:sub(c + 1, c + 1)
  end) .. ({ '', '==', '=' })[#data % 3 + 1])
end
local counter = 0
function setup(thread)
  counter = counter + 1
  thread:set("seed", counter)
end
function init(args)
  math.randomseed(tonumber(seed or 1) * 7919)
  keys = tonumber(os.getenv("HIVEKV_BENCH_KEYS") or "100000")
  op = os.getenv("HIVEKV_BENCH_OP") or "get"
  value = b64(string.rep("v", 100))
  encoded = {}
end
request = function()
  local k = math.random(0, keys - 1)
  local key = encoded[k]
  if key == nil then
    key = b64("k" .. k)
    encoded[k] = key
  end
  if op == "put" then
    return wrk.format("POST", "/v3/kv/put", nil, '{"key":"' .. key .. '","value":"' .. value .. '"}')
  end
  return wrk.format("POST", "/v3/kv/range", nil, '{"key":"' .. key .. '"}')
end
