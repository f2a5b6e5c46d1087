-- perfev.cli.run: what the subcommands share to run the thing they
-- measure -- a Lua script in this process (with its own `arg` and an
-- os.exit that ends the script, not perfev), or a command with its exit
-- status passed through.
local command = require "perfev.stat.command"
local interrupt = require "perfev.interrupt"

local M = {}

local Exit = {}   -- the error value os.exit raises inside a script

-- is_script(words) -> true when the command is a Lua script (NAME.lua)
function M.is_script(words)
  return words[1] ~= nil and words[1]:match("%.lua$") ~= nil
end

-- script_traceback(tb) -> a traceback (debug.traceback's text) cut where
-- perfev's own frames begin, below the script's main chunk, as lua.c
-- prints a script's error.
function M.script_traceback(tb)
  local cut = tb:find("in main chunk\n", 1, true)
  return cut and tb:sub(1, tb:find("\n", cut, true) - 1) or tb
end

-- The message of a script's error with its traceback.
local function script_error(e)
  if type(e) ~= "string" then
    local mt = getmetatable(e)
    e = (mt and mt.__tostring) and tostring(e) or ("(error object is a %s value)"):format(type(e))
  end
  return M.script_traceback(debug.traceback(e, 2))
end

-- script_fn(path, args, who[, call]) -> a function that runs the script
-- with its `arg` (arg[0] = path, arg[1..] = args) and returns its exit
-- status, as lua would: 0, the status of its os.exit, or 1 after an error,
-- which is written to stderr with its traceback after "who: " (the
-- subcommand). Ctrl-C (perfev.interrupt) is raised on, for the subcommand
-- to end with what it measured. nil, message when the file cannot be
-- loaded. call(chunk, handler, ...) -> as xpcall (the default): how the
-- chunk is called (perfev record's calls the profiler's run, whose samples
-- then start at the script's main chunk).
function M.script_fn(path, args, who, call)
  call = call or xpcall
  local chunk, msg = loadfile(path)
  if not chunk then return nil, msg end
  local function handler(e)
    if getmetatable(e) == Exit or interrupt.is(e) then return e end
    return script_error(e)
  end
  return function()
    local saved_arg, saved_exit = rawget(_G, "arg"), os.exit
    local a = { [0] = path }
    for i, v in ipairs(args or {}) do a[i] = v end
    _G.arg = a
    -- os.exit inside the script ends the script with its status
    os.exit = function(code)   -- luacheck: ignore 122
      if code == nil or code == true then code = 0 elseif code == false then code = 1 end
      error(setmetatable({ code = code }, Exit), 0)
    end
    local ok, err = call(chunk, handler, (table.unpack or rawget(_G, "unpack"))(a))
    os.exit = saved_exit   -- luacheck: ignore 122
    _G.arg = saved_arg
    if ok then return 0 end
    if getmetatable(err) == Exit then return err.code end
    if interrupt.is(err) then error(err, 0) end
    io.stderr:write(who and (who .. ": ") or "", err, "\n")
    return 1
  end
end

-- profiled(p) -> the call script_fn takes to run the script under the
-- profiler p (p:run, whose samples then start at the script's main chunk),
-- the error's traceback taken where it was raised (p.traceback).
function M.profiled(p)
  return function(chunk, handler, ...)
    local ok, e = pcall(p.run, p, chunk, ...)
    if ok then return true end
    if type(e) ~= "string" or interrupt.is(e) or not p.traceback then return false, handler(e) end
    return false, M.script_traceback(p.traceback)
  end
end

-- command(words) -> exit status of the command run with these words (no
-- shell syntax), as a shell reports it: 127 and a message when it cannot
-- be found, 128 + N when signal N ended it.
function M.command(words)
  local path, msg, status = command.find(words[1])
  if not path then return status, msg end
  local ok, how, code = os.execute("exec " .. command.join(words))
  if type(ok) == "number" then   -- LuaJIT: the raw wait status
    if ok % 256 == 0 then return math.floor(ok / 256) % 256 end
    return 128 + ok % 128
  end
  return command.exit_code(how, code)
end

-- event_error(message) -> perfev.parse's error about an event, in the
-- library's words (its "did you mean" kept) without the position or the
-- function it was raised in, and with the command that lists the events
-- (perfev list) for the function (perfev.list()); nil when the message is
-- about something else
function M.event_error(msg)
  msg = tostring(msg)
  local rest = msg:match("(unknown event .*)$") or msg:match("option 'events': (.*)$")
               or msg:match("perfev%.parse: (.*)$")
  if not rest then return nil end
  rest = rest:gsub("perfev%.list%(%)", "perfev list")
  return rest
end

-- positive(name) -> an argparse converter of a positive integer option
-- (name, as "--pid", is the one its message names).
function M.positive(name)
  return function(s)
    local n = tonumber(s)
    if not n or n <= 0 or math.floor(n) ~= n then
      return nil, ("option '%s' takes a positive integer, got '%s'"):format(name, s)
    end
    return math.floor(n)
  end
end

M.quote, M.join, M.find = command.quote, command.join, command.find

return M
