-- A timeline's frames and zones as one well-nested sequence of opens and
-- closes (what speedscope's evented profile and Trace Event B/E pairs
-- need): each frame at the outer level, its zones inside at their depth.
-- A zone still open when its frame was marked (it carries on into the
-- next) is closed at the mark and opened again in the next frame: two
-- slices of one call, each inside its frame.
local M = {}

-- intervals(tl) -> { { name, start, finish, level, item (the frame or zone) } }
local function intervals(tl)
  local iv = {}
  for _, f in ipairs(tl.frames) do
    iv[#iv + 1] = { name = "frame", start = f.start, finish = f.finish, level = 0, item = f, frame = true }
  end
  for _, z in ipairs(tl.zones) do
    iv[#iv + 1] = { name = z.name, start = z.start, finish = z.finish, level = z.depth, item = z }
  end
  table.sort(iv, function(a, b)
    if a.start ~= b.start then return a.start < b.start end
    if a.level ~= b.level then return a.level < b.level end
    return a.finish > b.finish
  end)
  return iv
end

-- events(tl) -> { { kind = "O" | "C", at, iv }, ... } in time order, well nested
function M.events(tl)
  local out, stack = {}, {}
  local function emit(kind, it, at) out[#out + 1] = { kind = kind, at = at, iv = it } end
  -- closes what finished by t (before t: `before`), earliest first; what is open above one that
  -- closes is closed with it and opened again (it finishes later)
  local function close_until(t, before)
    while true do
      local k
      for i = 1, #stack do
        local f = stack[i].finish
        if (f < t or (f == t and not before)) and (k == nil or stack[i].finish < stack[k].finish) then k = i end
      end
      if not k then return end
      local at, above = stack[k].finish, {}
      for i = #stack, k + 1, -1 do
        emit("C", stack[i], at)
        above[#above + 1] = stack[i]
        stack[i] = nil
      end
      emit("C", stack[k], at)
      stack[k] = nil
      for i = #above, 1, -1 do
        if above[i].finish > at then
          emit("O", above[i], at)
          stack[#stack + 1] = above[i]
        end
      end
    end
  end
  for _, it in ipairs(intervals(tl)) do
    -- what finished before it starts
    close_until(it.start, true)
    -- what is open at its level or deeper (zones carried over a mark, when
    -- a frame starts), or above what ends as it starts, is closed here;
    -- what goes on is opened again, around it or inside it
    local again = {}
    while #stack > 0 do
      local ends = false
      for i = 1, #stack do ends = ends or stack[i].finish <= it.start end
      local top = stack[#stack]
      if top.level < it.level and not ends then break end
      emit("C", top, it.start)
      stack[#stack] = nil
      if top.level ~= it.level and top.finish > it.start then table.insert(again, 1, top) end
    end
    for _, a in ipairs(again) do
      if a.level < it.level then
        emit("O", a, it.start)
        stack[#stack + 1] = a
      end
    end
    emit("O", it, it.start)
    stack[#stack + 1] = it
    for _, a in ipairs(again) do
      if a.level > it.level then
        emit("O", a, it.start)
        stack[#stack + 1] = a
      end
    end
  end
  close_until(math.huge)
  return out
end

return M
