dofile(os.getenv("BENCH_LUA_DIR") .. "/report.lua")
request = function() return wrk.format("GET", "/episodes/search?q=" .. bench_urlencode(bench_query())) end
