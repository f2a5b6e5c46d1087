-- A trivial attach reader for the engine's specs (spec/attach_spec.lua),
-- until the real ones (perfev.attach.puc, perfev.attach.luajit) are
-- there: one frame per sample, named after the file mapped at the
-- sampled instruction (rip), and "outside" where no file maps it. It
-- reads what the engine gives (registers, maps), never guesses a Lua stack.
local M = { name = "test reader (the rip's mapping)" }

function M.probe(t)
  if not t.exe then return nil, "no executable" end
  local state = { runtime = "any", states = {}, target = t }
  function state.stack(st, _, regs)
    local m = st.target:map_of(regs.rip)
    if not m then
      st.target:refresh()
      m = st.target:map_of(regs.rip)
    end
    if not (m and m.path) then return nil, "the rip is in no file", "outside" end
    return { { what = "C", name = m.path:match("[^/]*$") } }
  end
  return state
end

return M
