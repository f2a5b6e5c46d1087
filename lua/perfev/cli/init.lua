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

local M = {}

M.SUBCOMMANDS = { "stat", "record", "report", "list", "profile" }
M.USAGE_ERROR = 129

local function available(name)
  local mod = "perfev.cli." .. name
  if package.loaded[mod] then return true end
  return package.searchpath(mod, package.path) ~= nil
end

-- parser() -> the argparse parser, and the subcommand modules by name
function M.parser()
  local parser = argparse("perfev", "Linux perf events for Lua: perf stat, record, report, list and profile.")
    :command_target("command")
    :require_command(true)
    :help_max_width(100)
  parser:epilog("Run 'perfev <command> --help' for a command's options. See doc/cli.md.")
  local mods = {}
  for _, name in ipairs(M.SUBCOMMANDS) do
    if available(name) then
      local mod = require("perfev.cli." .. name)
      mods[name] = mod
      local cmd = parser:command(name, mod.summary)
      mod.configure(cmd)
    end
  end
  return parser, mods
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
  local parser, mods = M.parser()
  args = split_command(args, mods)
  local ok, result = parser:pparse(args)
  if not ok then
    local sub = which_command(args, mods)
    local who = sub and ("perfev " .. sub) or "perfev"
    io.stderr:write(("%s: %s (see '%s --help')\n"):format(who, result, who))
    return M.USAGE_ERROR
  end
  local mod = mods[result.command]
  local rok, status = pcall(mod.run, result)
  if not rok then
    io.stderr:write(("perfev %s: %s\n"):format(result.command, tostring(status)))
    return 1
  end
  return status or 0
end

return M
