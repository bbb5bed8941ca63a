-- wrk script: POSTs the JSON body in the file named by $WRK_BODY to the URL's path, for
-- load-testing /v1/completions or /v1/chat/completions as users do:
--   WRK_BODY=body.json wrk -t1 -c16 -d10s -s bench/wrk/post.lua http://127.0.0.1:8080/v1/completions
-- Non-2xx answers are counted by wrk ("Non-2xx or 3xx responses").
local f = assert(io.open(os.getenv("WRK_BODY") or "body.json", "rb"))
wrk.method = "POST"
wrk.body = f:read("*a")
f:close()
wrk.headers["Content-Type"] = "application/json"
