-- Shared by the load scripts: a seeded generator per wrk thread and a 100-byte value.
local counter = 0
function setup(thread)
  counter = counter + 1
  thread:set("seed", counter)
end
function init(args)
  math.randomseed(tonumber(seed or 1) * 7919)
  keys = tonumber(os.getenv("HIVEKV_BENCH_KEYS") or "100000")
  value = '"' .. string.rep("v", 98) .. '"'
  headers = { ["content-type"] = "application/json" }
end
