-- tools/httpd.lua DIR [SECONDS]: a static file server on 127.0.0.1 for the
-- browser checks (speedscope and the SVG flame graph in headless Chromium
-- need http://, not file://). Prints the port it listens on, serves GET
-- requests one at a time, and exits after SECONDS (default 120).
local socket = require "socket"

local dir, seconds = arg[1], tonumber(arg[2] or "120")
if not dir then io.stderr:write("usage: httpd.lua DIR [SECONDS]\n") os.exit(2) end

local TYPES = { html = "text/html", js = "application/javascript", css = "text/css",
                json = "application/json", svg = "image/svg+xml", png = "image/png",
                txt = "text/plain", folded = "text/plain" }

local server = assert(socket.bind("127.0.0.1", 0))
local _, port = server:getsockname()
io.stdout:write(port, "\n")
io.stdout:flush()
server:settimeout(0.5)

local function respond(c, status, ctype, body)
  c:send(("HTTP/1.0 %s\r\nContent-Type: %s\r\nContent-Length: %d\r\n"
          .. "Access-Control-Allow-Origin: *\r\nConnection: close\r\n\r\n"):format(status, ctype, #body))
  c:send(body)
end

local function serve(c)
  c:settimeout(5)
  local line = c:receive("*l")
  if not line then return end
  repeat local h = c:receive("*l") until not h or h == ""
  local path = line:match("^GET (/[^ ?#]*)")
  if not path or path:find("%.%.") then return respond(c, "400 Bad Request", "text/plain", "bad request") end
  if path == "/" then path = "/index.html" end
  local f = io.open(dir .. path, "rb")
  if not f then return respond(c, "404 Not Found", "text/plain", "not found") end
  local body = f:read("a")
  f:close()
  respond(c, "200 OK", TYPES[path:match("%.(%w+)$") or ""] or "application/octet-stream", body)
end

local deadline = socket.gettime() + seconds
while socket.gettime() < deadline do
  local c = server:accept()
  if c then
    pcall(serve, c)
    c:close()
  end
end
