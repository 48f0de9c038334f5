dofile(os.getenv("BENCH_LUA_DIR") .. "/report.lua")
request = function() return wrk.format("GET", "/episodes/" .. math.random(1, bench_max_id)) end
