-- make install / make uninstall into a scratch DESTDIR: uninstall removes the
-- files and exactly the directories install created.
local shell = require "spec.support.shell"

local function run(cmd)
  local out = shell.sh(cmd .. " 2>&1; echo \"exit=$?\"")
  return (out:gsub("exit=%d+%s*$", "")), tonumber(out:match("exit=(%d+)%s*$"))
end

local function tree(dir)
  local t = {}
  for line in shell.sh("cd " .. shell.quote(dir) .. " && find . | sort"):gmatch("[^\n]+") do t[#t + 1] = line end
  return t
end

describe("make install and make uninstall", function()
  it("removes what install put there, and the directories it created only", function()
    local dest = shell.tmpdir()
    -- something of the user's beside where perfev goes: it must stay
    local mine = dest .. "/opt/share/lua"
    assert.are.equal(0, select(2, run("mkdir -p " .. mine .. " && touch " .. mine .. "/mine.lua")))
    local before = tree(dest)
    local args = (os.getenv("PERFEV_MAKE_ARGS") or "") .. " DESTDIR=" .. dest .. " PREFIX=/opt"
    local out, status = run("make -s install " .. args)
    assert.are.equal(0, status, out)
    local installed = tree(dest)
    local has_core, has_init = false, false
    for _, p in ipairs(installed) do
      has_core = has_core or p:match("/lib/lua/[%d.]+/perfev/core%.so$") ~= nil
      has_init = has_init or p:match("/share/lua/[%d.]+/perfev/init%.lua$") ~= nil
    end
    assert.is_true(has_core and has_init, table.concat(installed, "\n"))
    out, status = run("make -s uninstall " .. args)
    assert.are.equal(0, status, out)
    assert.are.same(before, tree(dest))
    shell.rmdir(dest)
  end)
end)
