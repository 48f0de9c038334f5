dofile(os.getenv("BENCH_LUA_DIR") .. "/report.lua")
request = bench_search_body
