-- tools/gen-man.lua > perfev.1: the perfev(1) man page, made from the
-- command's own parser (perfev.cli), so that it says what --help says.
-- Run with the checkout's LUA_PATH/LUA_CPATH (make install does).
local cli = require "perfev.cli"
local core = require "perfev.core"

local function roff(s)
  return (s:gsub("\\", "\\e"):gsub("\n%.", "\n\\&."):gsub("^%.", "\\&."):gsub("\n'", "\n\\&'"))
end

local parser, _, cmds = cli.parser()
local out = {}
local function put(s) out[#out + 1] = s end

put(('.TH PERFEV 1 "" "perfev %s" "User Commands"'):format(core.VERSION))
put(".SH NAME")
put("perfev \\- Linux perf events for Lua: perf stat, record, report, list and profile")
put(".SH SYNOPSIS")
put(".nf")
for _, name in ipairs(cli.SUBCOMMANDS) do
  if cmds[name] then put(roff((cmds[name]:get_usage():gsub("^Usage: ", "")))) end
end
put("perfev help [command]")
put("perfev \\-\\-version")
put(".fi")
put(".SH DESCRIPTION")
put(roff(parser._description or ""))
put("The commands take perf's option letters where perf has the option. A command after")
put(".B \\-\\-")
put("runs as a child process; a Lua script")
put(".I NAME.lua")
put("runs inside perfev's own Lua, so that its Lua functions are seen by name.")
for _, name in ipairs(cli.SUBCOMMANDS) do
  if cmds[name] then
    put(".SH PERFEV " .. name:upper())
    put(".nf")
    put(roff(cmds[name]:get_help()))
    put(".fi")
  end
end
put(".SH EXIT STATUS")
put("The command's or the script's exit status where one ran; 129 for a usage error;")
put("127 when the command or script cannot be found; 130 after Ctrl-C (what was measured is written);")
put("1 for other errors.")
put(".SH FILES")
put("The reference pages of the library and of each command are installed in")
put(".IR PREFIX /share/doc/perfev")
put("(cli.md for the commands, README.md for the library).")
put(".SH SEE ALSO")
put(".BR perf (1),")
put(".BR perf_event_open (2)")
io.write(table.concat(out, "\n"), "\n")
