-- perfev.cli: the `perfev` command (bin/perfev). One argparse parser
-- (lua-argparse) with a subcommand per module perfev.cli.<name> that is
-- installed; each module gives
--   M.summary              one line for `perfev --help`
--   M.configure(cmd)       its options and arguments on the argparse command
--   M.run(args) -> status  the exit status (errors: one line on stderr,
--                          "perfev <name>: ...", and a non-zero status)
--   M.value_options        optional: its options that take a value; the
--                          first word that is not an option (nor such a
--                          value) starts the command to run, as perf's
--                          option parser stops there: `perfev stat ls -l`
-- Usage errors exit with 129, as perf's do. See doc/cli.md.
local argparse = require "argparse"
local interrupt = require "perfev.interrupt"

local M = {}

M.SUBCOMMANDS = { "stat", "record", "report", "list", "profile" }
M.USAGE_ERROR = 129

local function available(name)
  local mod = "perfev.cli." .. name
  if package.loaded[mod] then return true end
  return package.searchpath(mod, package.path) ~= nil
end

-- parser() -> the argparse parser, the subcommand modules by name and
-- their argparse commands by name
function M.parser()
  local parser = argparse("perfev", "Linux perf events for Lua: perf stat, record, report, list and profile.")
    :command_target("command")
    :require_command(false)
    :help_max_width(100)
  parser:flag("-v --version", "Print perfev's version, the Lua it runs on and where its modules are.")
  parser:epilog("Run 'perfev help <command>' or 'perfev <command> --help' for a command's options; "
                .. "'man perfev' and doc/cli.md (installed under share/doc/perfev) have the details.")
  local mods, cmds = {}, {}
  for _, name in ipairs(M.SUBCOMMANDS) do
    if available(name) then
      local mod = require("perfev.cli." .. name)
      mods[name] = mod
      local cmd = parser:command(name, mod.summary)
      mod.configure(cmd)
      cmds[name] = cmd
    end
  end
  parser:command("help", "Show the help of perfev or of one of its commands (as --help does).")
    :argument("topic", "The command."):args("?")
  return parser, mods, cmds
end

-- perfev --version: what perfev is, on which Lua, loaded from where
function M.version()
  local core = require "perfev.core"
  local jit = rawget(_G, "jit")
  local where = package.searchpath("perfev.cli", package.path) or "?"
  return ("perfev %s (%s; modules: %s; core: %s)"):format(core.VERSION, jit and jit.version or _VERSION,
    (where:gsub("/perfev/cli/init%.lua$", "")), package.searchpath("perfev.core", package.cpath) or "?")
end

local function is_value_option(word, values)
  for _, v in ipairs(values) do
    if word == v then return true end
  end
  return false
end

-- Inserts "--" before the command of `perfev stat [options] cmd args...`
-- so that the command's own options are not taken for perfev's.
local function split_command(args, mods)
  local out, i = {}, 1
  local sub
  while i <= #args do
    local a = args[i]
    out[#out + 1] = a
    i = i + 1
    if mods[a] then sub = mods[a] break end
    if a == "--" then return args end
  end
  if not (sub and sub.value_options) then return args end
  while i <= #args do
    local a = args[i]
    if a == "--" then break end
    if a:sub(1, 1) == "-" and #a > 1 then
      out[#out + 1] = a
      if is_value_option(a, sub.value_options) and args[i + 1] then
        out[#out + 1] = args[i + 1]
        i = i + 1
      end
      i = i + 1
    else
      out[#out + 1] = "--"
      break
    end
  end
  for j = i, #args do out[#out + 1] = args[j] end
  return out
end

local function which_command(args, mods)
  for _, a in ipairs(args) do
    if mods[a] then return a end
  end
  return nil
end

-- main(arg) -> exit status (bin/perfev passes it to os.exit)
function M.main(argv)
  local args = {}
  for i = 1, #(argv or {}) do args[i] = argv[i] end
  local parser, mods, cmds = M.parser()
  args = split_command(args, mods)
  local ok, result = parser:pparse(args)
  local function usage(who, msg)
    io.stderr:write(("%s: %s (see '%s --help')\n"):format(who, msg, who))
    return M.USAGE_ERROR
  end
  if not ok then
    local sub = which_command(args, mods)
    return usage(sub and ("perfev " .. sub) or "perfev", result)
  end
  if result.version then
    io.stdout:write(M.version(), "\n")
    return 0
  end
  if result.command == "help" then
    local topic = result.topic
    if topic and not mods[topic] then return usage("perfev help", ("unknown command '%s'"):format(topic)) end
    io.stdout:write(topic and cmds[topic]:get_help() or parser:get_help(), "\n")
    return 0
  end
  if not result.command then return usage("perfev", "a command is required") end
  local mod = mods[result.command]
  local rok, status = pcall(mod.run, result)
  if not rok then
    -- Ctrl-C where a command did not handle it: quiet, as perf ends
    if interrupt.is(status) then return interrupt.STATUS end
    io.stderr:write(("perfev %s: %s\n"):format(result.command, tostring(status)))
    return 1
  end
  return status or 0
end

return M
