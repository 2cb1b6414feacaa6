-- The Lua face of agentbreaker: the classes users see, made from the raw functions of the Rust
-- module (lib.rs). Loaded once per Lua state by luaopen_agentbreaker with the table of raw
-- functions, one table per class. Every raw function returns `true, results...` or
-- `false, "CODE: message"`; `check` raises the second form as a Lua error whose value is that
-- string (level 0, so it begins with the code). No breaker behaviour lives here.
-- Runs unchanged on Lua 5.1, LuaJIT and Lua 5.4.

local raw = ...

local error, pairs, pcall, select, setmetatable, tostring, type =
  error, pairs, pcall, select, setmetatable, tostring, type
local unpack = table.unpack or unpack

local function check(ok, ...)
  if ok then
    return ...
  end
  error((...), 0)
end

-- The Rust object behind each breaker of the three hot classes (CircuitBreaker,
-- StagnationBreaker, BudgetBreaker), whose objects are cells (capi.rs), weakly by cell.
local handleOf = setmetatable({}, { __mode = "k" })

-- A raw function as a method or function (a cell's Rust object in place of the cell).
local function wrap(f)
  return function(self, ...)
    return check(f(handleOf[self] or self, ...))
  end
end

local function readOnly(name)
  return function(_, key)
    error(("INVALID_ARGUMENT: %s objects are read-only (cannot set %s); configure them through %s.new({...})")
      :format(name, tostring(key), name), 0)
  end
end

-- The metatable fields of each class's objects, handed back to the Rust side.
local metas = {}

-- Class `name` from raw[name]: its methods, its objects' metatable (`__` keys) and the functions
-- of this file's own (`_` keys).
local function class(name, shown)
  local methods, own = {}, {}
  local meta = { __index = methods, __newindex = readOnly(shown or name), __name = "agentbreaker." .. name }
  for key, f in pairs(raw[name]) do
    if key:sub(1, 2) == "__" then
      meta[key] = wrap(f)
    elseif key:sub(1, 1) == "_" then
      own[key:sub(2)] = wrap(f)
    else
      methods[key] = wrap(f)
    end
  end
  metas[name] = meta
  return methods, meta, own
end

local M = { VERSION = raw.version, null = raw.null }
for name, f in pairs(raw.functions) do
  M[name] = wrap(f)
end

local _, _, clocks = class("Clock", "ManualClock")
M.ManualClock = { new = clocks.manual }
M.SystemClock = { new = clocks.system }

-- `tostring(object)`: agentbreaker.Class(detail).
local function printable(meta, name, detail)
  meta.__tostring = function(self)
    return ("agentbreaker.%s(%s)"):format(name, detail(self))
  end
end

---------------------------------------------------------------------------------------------
-- The hot classes. Their hot methods are C functions (capi.rs, `bind`) that take the common
-- case straight into the core and hand every other one to the checked method given them.

local bind, setListened = raw.bind, raw.set_listened

-- `C.new(config)` makes a cell with `metatable(cell)` and keeps its Rust object; every listener
-- added marks the cell (its hot methods then take the checked way, which calls listeners).
local function cells(C, metatable)
  local newObject, addListener = C.new, C.addListener
  function C.new(config)
    local cell, handle
    cell, handle = newObject(config, metatable(function() return cell end))
    handleOf[cell] = handle
    return cell
  end
  function C.addListener(self, listener)
    local id = addListener(self, listener)
    setListened(self)
    return id
  end
end

---------------------------------------------------------------------------------------------
-- CircuitBreaker: the FailureBreaker under seed 004's name, with its readable fields

local CircuitBreaker, cbMeta, cbOwn = class("CircuitBreaker")
M.CircuitBreaker = CircuitBreaker
M.FailureBreaker = CircuitBreaker -- the contract's name (`FailureBreaker.new{store=..., key=...}`)
printable(cbMeta, "CircuitBreaker", function(cb)
  return ("%s, %d/%d failures"):format(cb.state, cb.consecutiveFailures, cb.threshold)
end)

-- The seed's fields, read live from getStatus(): how to change each, and its value. Times are
-- the seed's whole seconds (it used os.time()); cooldownSeconds is fractional when it is not whole.
local floor = math.floor
local SEED_FIELDS = {
  state = "reset() or restore()",
  consecutiveFailures = "reset() or restore()",
  threshold = "CircuitBreaker.new({failureThreshold = n})",
  cooldownSeconds = "CircuitBreaker.new({cooldownMs = ms})",
  openedAt = "reset() or restore()",
  failureHistory = "reset() or restore()",
}
local function seedField(status, key)
  if key == "cooldownSeconds" then
    local ms = status.cooldownMs
    return ms % 1000 == 0 and floor(ms / 1000) or ms / 1000
  elseif key == "openedAt" then
    return status.openedAt and floor(status.openedAt / 1000)
  end
  return status[key]
end

local function cbNewIndex(_, key)
  local how = SEED_FIELDS[key]
  if how then
    error(("INVALID_ARGUMENT: CircuitBreaker.%s is read-only; use %s"):format(key, how), 0)
  end
  error(("INVALID_ARGUMENT: CircuitBreaker objects are read-only (cannot set %s); "
    .. "add methods to the CircuitBreaker class table instead"):format(tostring(key)), 0)
end

-- Every breaker has a metatable of its own, whose `__index` is a table holding its two hot
-- methods (found without a metamethod call: one costs more than the rest of the call) and
-- falling back to the class table, then to the seed's fields read from its Rust object. The two
-- call the class's method when code has replaced it.
local ownRecordSuccess = bind(1, CircuitBreaker, "recordSuccess", CircuitBreaker.recordSuccess)
local ownShouldAllow = bind(2, CircuitBreaker, "shouldAllowOperation", CircuitBreaker.shouldAllowOperation)
local getStatus = CircuitBreaker.getStatus
cells(CircuitBreaker, function(cell)
  local own = setmetatable({ recordSuccess = ownRecordSuccess, shouldAllowOperation = ownShouldAllow }, {
    __index = function(_, key)
      local m = CircuitBreaker[key]
      if m == nil and SEED_FIELDS[key] then
        return seedField(getStatus(cell()), key)
      end
      return m
    end,
  })
  return { __index = own, __newindex = cbNewIndex, __tostring = cbMeta.__tostring,
    __name = "agentbreaker.CircuitBreaker", __metatable = false }
end)

local function errorText(err)
  local ok, text = pcall(tostring, err)
  if ok and type(text) == "string" then
    return text
  end
  return "(an error value without a text form)"
end

local function pack(...)
  return { n = select("#", ...), ... }
end

-- Guarded call: refused with a CIRCUIT_OPEN error without running fn; otherwise fn runs under
-- pcall, its outcome is recorded (a failure with the error's text), and its results are
-- returned or its error is raised again unchanged.
local acquire = cbOwn.acquire
function CircuitBreaker.call(self, fn, ...)
  acquire(self, fn)
  local results = pack(pcall(fn, ...))
  if results[1] then
    CircuitBreaker.recordSuccess(self)
    return unpack(results, 2, results.n)
  end
  CircuitBreaker.recordFailure(self, errorText(results[2]))
  error(results[2], 0)
end

-- The protected form: exactly pcall(cb.call, cb, fn, ...).
function CircuitBreaker.pcall(self, fn, ...)
  return pcall(CircuitBreaker.call, self, fn, ...)
end

-- How a CircuitBreaker that is not quiet reports the seed's lines: `print`, and `warn` for the
-- warning where the host has it (Lua 5.4), else `print`. Globals are read at each call, so
-- replacing _G.print or _G.warn redirects the lines.
local globals = _G
local function seedLog(level, line)
  local warnFn = globals.warn
  if level == "warn" and type(warnFn) == "function" then
    warnFn(line)
  else
    globals.print(line)
  end
end

---------------------------------------------------------------------------------------------
-- StagnationBreaker, BudgetBreaker: cells with their class's metatable

local StagnationBreaker, sbMeta = class("StagnationBreaker")
M.StagnationBreaker = StagnationBreaker
sbMeta.__metatable = false
printable(sbMeta, "StagnationBreaker", function(sb)
  local status = sb:getStatus()
  return ("%s, %d iterations without progress"):format(status.state, status.consecutiveNoProgress)
end)
StagnationBreaker.recordProgress = bind(3, StagnationBreaker.recordProgress)
StagnationBreaker.check = bind(4, StagnationBreaker.check, raw.object_mt)
cells(StagnationBreaker, function() return sbMeta end)

local BudgetBreaker, bbMeta = class("BudgetBreaker")
M.BudgetBreaker = BudgetBreaker
bbMeta.__metatable = false
printable(bbMeta, "BudgetBreaker", function(bb)
  return #bb:snapshot().tasks .. " open tasks"
end)
BudgetBreaker.ingest = bind(5, BudgetBreaker.ingest)
cells(BudgetBreaker, function() return bbMeta end)

---------------------------------------------------------------------------------------------
-- The other classes

M.ExitStrategy = class("ExitStrategy")
M.FixPlan = { new = wrap(raw.FixPlan.new), fromMarkdown = wrap(raw.FixPlan.fromMarkdown) }
local loopMeta, monitorMeta
M.Loop, loopMeta = class("Loop")
printable(loopMeta, "Loop", function(l)
  local status = l:getStatus()
  return "iteration " .. status.iteration .. (status.reason and ", exited: " .. status.reason or "")
end)
M.Monitor, monitorMeta = class("Monitor")
printable(monitorMeta, "Monitor", function(m)
  local status = m:status()
  return status.profile .. ", " .. #status.tasks .. " open tasks"
end)

return M, metas, seedLog
