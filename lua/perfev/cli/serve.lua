-- `perfev profile -p PID --serve ADDR`: GET /debug/pprof/profile?seconds=N
-- (Go's net/http/pprof convention, what Parca, Grafana Alloy's
-- pyroscope.scrape and go tool pprof ask) for any running process: each
-- scrape attaches (perfev.attach) for its N seconds and answers the Lua
-- stacks as gzipped profile.proto. The parameters are those of
-- perfev.resty's endpoint (perfev.profile.scrape's window_args): seconds
-- (30, 1 to 300), event, freq or period; a bad one is a 400 with perfev's
-- message. The HTTP server is Debian's lua-socket (luasocket): one
-- connection at a time, so a second scrape waits for the running one
-- (its window follows), none is refused. The server ends when the process
-- it attaches to has exited, or at Ctrl-C (doc/cli.md).
local options = require "perfev.options"
local interrupt = require "perfev.interrupt"

local M = {}

M.PATH = "/debug/pprof/profile"
M.ACCEPT_TIMEOUT = 0.5         -- seconds between two looks at the target while idle
M.READ_TIMEOUT = 10            -- seconds a client has to send its request

-- addr(s) -> host, port | nil, message: HOST:PORT (IPv4 or a name; [v6]:PORT)
function M.addr(s)
  local host, port = tostring(s):match("^%[(.+)%]:(%d+)$")
  if not host then host, port = tostring(s):match("^([^:]*):(%d+)$") end
  port = tonumber(port)
  if not host or not port or port > 65535 then
    return nil, ("--serve takes HOST:PORT (127.0.0.1:6060), got '%s'"):format(tostring(s))
  end
  if host == "" then host = "0.0.0.0" end
  return host, port
end

local function unescape(s)
  return (s:gsub("+", " "):gsub("%%(%x%x)", function(h) return string.char(tonumber(h, 16)) end))
end

-- query(s) -> { name = value | true (no value) | { values } (given twice) },
-- as ngx.req.get_uri_args gives them (perfev.profile.resty.args reads both).
function M.query(s)
  local t = {}
  for pair in (s or ""):gmatch("[^&]+") do
    local k, v = pair:match("^([^=]*)=(.*)$")
    if k then v = unescape(v) else k, v = pair, true end
    k = unescape(k)
    local have = t[k]
    if have == nil then t[k] = v
    elseif type(have) == "table" then have[#have + 1] = v
    else t[k] = { have, v } end
  end
  return t
end

local REASONS = { [200] = "OK", [400] = "Bad Request", [404] = "Not Found", [405] = "Method Not Allowed",
                  [500] = "Internal Server Error" }

local function respond(c, status, body, ctype, extra)
  local head = { ("HTTP/1.1 %d %s"):format(status, REASONS[status] or ""),
                 "Content-Type: " .. (ctype or "text/plain; charset=utf-8"),
                 ("Content-Length: %d"):format(#body), "Connection: close" }
  for _, h in ipairs(extra or {}) do head[#head + 1] = h end
  c:send(table.concat(head, "\r\n") .. "\r\n\r\n")
  c:send(body)
end

-- The request line and headers of one connection: method, target | nil.
local function read_request(c)
  c:settimeout(M.READ_TIMEOUT)
  local line = c:receive("*l")
  if not line then return nil end
  repeat local h = c:receive("*l") until not h or h == ""
  return line:match("^(%u+) (%S+)")
end

-- serve(o) -> exit status. o: pid, addr, profile(args) -> profile | nil,
-- message, status (the attach for one window: args = { seconds, event,
-- freq, period }), alive() -> whether the target still runs, log(line).
function M.serve(o)
  local socket = require "socket"
  local scrape = require "perfev.profile.scrape"
  local pprof = require "perfev.profile.pprof"
  local host, port = M.addr(o.addr)
  if not host then o.log(port) return 129 end
  local server, err = socket.bind(host, port)
  if not server then
    o.log(("cannot listen on %s: %s"):format(o.addr, tostring(err)))
    return 1
  end
  local _, bound = server:getsockname()
  o.log(("serving http://%s:%s%s?seconds=N for process %d"):format(host, tostring(bound), M.PATH, o.pid))
  server:settimeout(M.ACCEPT_TIMEOUT)
  while o.alive() do
    local c = server:accept()
    if c then
      local method, target = read_request(c)
      local path, q = (target or ""):match("^([^?#]*)%??([^#]*)")
      if not method then
        c:close()
        c = nil
      elseif path ~= M.PATH then
        respond(c, 404, ("perfev: %s only (%s?seconds=N[&event=E][&freq=F|&period=P])\n"):format(M.PATH, M.PATH))
      elseif method ~= "GET" then
        respond(c, 405, "perfev: GET only\n")
      else
        local args, msg = scrape.window_args(M.query(q))
        if not args then
          respond(c, 400, "perfev: " .. msg .. "\n")
        else
          local t0 = os.time()
          local ok, pr, why, status = pcall(o.profile, args)
          if not ok and interrupt.is(pr) then
            c:close()
            server:close()
            return interrupt.STATUS
          end
          if not ok then pr, why, status = nil, options.strip_where(pr), 400 end
          if not pr then
            respond(c, status or 500, "perfev: " .. tostring(why) .. "\n")
          else
            pr.time = pr.time or t0
            pr.duration = pr.duration or args.seconds * 1e9
            local body = pprof.encode(pr)
            respond(c, 200, body, "application/octet-stream",
                    { 'Content-Disposition: attachment; filename="profile"',
                      ("X-Perfev-Samples: %.0f"):format(pr.samples or 0) })
          end
        end
      end
      if c then c:close() end
    end
  end
  server:close()
  o.log(("process %d has exited: no more profiles to serve"):format(o.pid))
  return 0
end

return M
