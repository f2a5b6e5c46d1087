-- perfev.interrupt: Ctrl-C as the Lua interpreters report it. lua.c and
-- luajit.c catch SIGINT while the main chunk runs and raise the error
-- "interrupted!" at the next Lua instruction (the command's child got the
-- SIGINT too); perfev's commands end quietly then, after writing what
-- they measured, with the shell's status for SIGINT, as perf does.
local M = {}

M.STATUS = 130   -- 128 + SIGINT

-- is(err) -> true when err is the interpreters' Ctrl-C error
function M.is(err)
  return type(err) == "string" and err:find("interrupted!", 1, true) ~= nil
end

return M
