-- perfev.cli.run: what the subcommands share to run the thing they
-- measure -- a Lua script in this process (with its own `arg` and an
-- os.exit that ends the script, not perfev), or a command with its exit
-- status passed through.
local command = require "perfev.stat.command"

local M = {}

local Exit = {}   -- the error value os.exit raises inside a script

-- is_script(words) -> true when the command is a Lua script (NAME.lua)
function M.is_script(words)
  return words[1] ~= nil and words[1]:match("%.lua$") ~= nil
end

-- script_fn(path, args[, call]) -> a function that runs the script with
-- its `arg` (arg[0] = path, arg[1..] = args) and returns its exit status;
-- raises a load error or the script's error (nil, message from load for a
-- missing file). call(chunk, ...) -> as pcall: how the chunk is called
-- (default pcall; perfev record's calls the profiler's run, whose samples
-- then start at the script's main chunk).
function M.script_fn(path, args, call)
  call = call or pcall
  local chunk, msg = loadfile(path)
  if not chunk then return nil, msg end
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
    local ok, err = call(chunk, (table.unpack or rawget(_G, "unpack"))(a))
    os.exit = saved_exit   -- luacheck: ignore 122
    _G.arg = saved_arg
    if ok then return 0 end
    if getmetatable(err) == Exit then return err.code end
    error(err, 0)
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

-- event_error(message) -> perfev.parse's error for an unknown event as
-- one short line, or nil when the message is about something else
function M.event_error(msg)
  msg = tostring(msg)
  local name = msg:match("unknown event '([^']*)'")
  if name then return ("unknown event '%s' (perfev list shows the events of this machine)"):format(name) end
  local rest = msg:match("option 'events': (.*)$") or msg:match("perfev%.parse: (.*)$")
  if rest then return rest end
  return nil
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
