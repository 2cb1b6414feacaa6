-- The Lua face of agentbreaker: classes and functions over the raw functions of the Rust module.
--
-- Loaded once per `require("agentbreaker")` by luaopen_agentbreaker with the table of raw
-- functions. Every raw function returns `true, results...` or `false, "CODE: message"`; `check`
-- turns the second form into a Lua error whose value is that string (raised with level 0, so the
-- string begins with the code). No breaker behaviour lives here: the core decides everything.
-- Runs unchanged on Lua 5.1, LuaJIT and Lua 5.4 (no 5.2+ syntax, no integer division).

local raw = ...

local error, pcall, select, tostring, type = error, pcall, select, tostring, type
local getmetatable, next, setmetatable = getmetatable, next, setmetatable
local unpack = table.unpack or unpack

local function check(ok, ...)
  if ok then
    return ...
  end
  error((...), 0)
end

-- A method forwarding to a raw function: self and every argument as given.
local function method(name)
  local f = raw[name]
  if type(f) ~= "function" then
    error("agentbreaker: no raw function " .. name, 0) -- a build mistake, caught at require
  end
  return function(self, ...)
    return check(f(self, ...))
  end
end

-- Tables keyed by object, weakly: the hot-path functions bound to each object.
local function byObject()
  return setmetatable({}, { __mode = "k" })
end

local function readOnly(class)
  return function(_, key)
    error(("INVALID_ARGUMENT: %s objects are read-only (cannot set %s); "
      .. "configure them through %s.new({...})"):format(class, tostring(key), class), 0)
  end
end

-- Makes `addListener` of `class` mark the cell (see StagnationBreaker) of a breaker given a
-- listener, so that its hot paths go through the raw functions, which enter the listener context.
local setListened = raw.set_listened
local function markListened(class, cells)
  local add = class.addListener
  class.addListener = function(self, listener)
    local id = add(self, listener)
    local cell = cells[self]
    if cell ~= nil then
      setListened(cell)
    end
    return id
  end
end

-- Adds the listener methods every event source has (made by `make`, `method` by default).
local function listenerMethods(class, prefix, make)
  make = make or method
  class.addListener = make(prefix .. "_add_listener")
  class.removeListener = make(prefix .. "_remove_listener")
  class.listenerErrors = make(prefix .. "_listener_errors")
end

local M = {
  VERSION = raw.version,
  null = raw.null,
}

-- Metatable fields of each class's objects, handed back to the Rust side.
local metas = {}

---------------------------------------------------------------------------------------------
-- Clocks (SPEC 1)

local Clock = {}
Clock.now = method("clock_now")
Clock.set = method("clock_set")
Clock.advance = method("clock_advance")
metas.Clock = { __index = Clock, __newindex = readOnly("ManualClock"), __tostring = method("clock_tostring") }

M.ManualClock = {
  new = function(startMs)
    return check(raw.manual_clock_new(startMs))
  end,
}
M.SystemClock = {
  new = function()
    return check(raw.system_clock_new())
  end,
}

---------------------------------------------------------------------------------------------
-- CircuitBreaker: the FailureBreaker (SPEC 2) under seed 004's name and fields

local CircuitBreaker = {}
M.CircuitBreaker = CircuitBreaker

-- A CircuitBreaker is a proxy (an empty userdata made by `raw.new_proxy`, see capi.rs) of the
-- Rust object (the mlua userdata), with a metatable of its own: its `__index` is a table of its
-- own two hot-path methods, found without a metamethod call; a miss there goes on to the class
-- table and then to the seed's fields, read from its own Rust object. Every method passes the
-- Rust object (found here by proxy) to the raw functions.
local handleOf = byObject()

-- A method forwarding to a raw function with the Rust object of `self` (anything that is not a
-- CircuitBreaker goes as it is, and the raw function reports it).
local function cbMethod(name)
  local f = method(name)
  return function(self, ...)
    return f(handleOf[self] or self, ...)
  end
end

CircuitBreaker.recordFailure = cbMethod("failure_record_failure")

-- The hot path, once per agent step. Each breaker has its own C functions for these two (in its
-- `__index` table, see CircuitBreaker.new) for the common case; the class's methods below take
-- every other, with raw functions that take the Rust object straight from the Lua stack (no
-- allocation), check `self` and return an error as its text, raised here.
local recordSuccessFast = raw.failure_record_success_fast
function CircuitBreaker.recordSuccess(self)
  local err = recordSuccessFast(handleOf[self] or self)
  if err ~= nil then
    error(err, 0)
  end
end

local shouldAllowFast = raw.failure_should_allow_operation_fast
function CircuitBreaker.shouldAllowOperation(self)
  local allowed, message = shouldAllowFast(handleOf[self] or self)
  if allowed == nil then
    error(message, 0)
  end
  return allowed, message
end

CircuitBreaker.getStatus = cbMethod("failure_get_status")
CircuitBreaker.metrics = cbMethod("failure_metrics")
CircuitBreaker.reset = cbMethod("failure_reset")
CircuitBreaker.snapshot = cbMethod("failure_snapshot")
CircuitBreaker.restore = cbMethod("failure_restore")
CircuitBreaker.save = cbMethod("failure_save")
CircuitBreaker.load = cbMethod("failure_load")
listenerMethods(CircuitBreaker, "failure", cbMethod)
-- A breaker given a listener tells its own methods (see CircuitBreaker.new) to go through the
-- raw functions, which enter the listener context.
local addListener = CircuitBreaker.addListener
function CircuitBreaker.addListener(self, listener)
  local id = addListener(self, listener)
  if handleOf[self] then
    setListened(self)
  end
  return id
end

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

-- Guarded call (SPEC 2): refused with a CIRCUIT_OPEN error without running fn; otherwise fn runs
-- under pcall, its outcome is recorded (a failure with the error's text), and its results are
-- returned or its error is raised again unchanged.
local acquire, recordFailure = cbMethod("failure_acquire"), CircuitBreaker.recordFailure
function CircuitBreaker.call(self, fn, ...)
  acquire(self, fn)
  local results = pack(pcall(fn, ...))
  if results[1] then
    CircuitBreaker.recordSuccess(self)
    return unpack(results, 2, results.n)
  end
  recordFailure(self, errorText(results[2]))
  error(results[2], 0)
end

-- The protected form: `true, results...` or `false, err` (fn's error, or "CIRCUIT_OPEN: ..." when
-- refused). Exactly pcall(cb.call, cb, fn, ...).
function CircuitBreaker.pcall(self, fn, ...)
  return pcall(CircuitBreaker.call, self, fn, ...)
end

-- The seed's readable fields, read live from the breaker.
local SEED_FIELDS = {
  state = "reset() or restore()",
  consecutiveFailures = "reset() or restore()",
  threshold = "CircuitBreaker.new({failureThreshold = n})",
  cooldownSeconds = "CircuitBreaker.new({cooldownMs = ms})",
  openedAt = "reset() or restore()",
  failureHistory = "reset() or restore()",
}

local fieldRaw = raw.failure_field
local cbNewIndex = function(_, key)
  local how = SEED_FIELDS[key]
  if how then
    error(("INVALID_ARGUMENT: CircuitBreaker.%s is read-only; use %s"):format(key, how), 0)
  end
  error(("INVALID_ARGUMENT: CircuitBreaker objects are read-only (cannot set %s); "
    .. "add methods to the CircuitBreaker class table instead"):format(tostring(key)), 0)
end
local cbToString = cbMethod("failure_tostring")

-- The Rust objects' own metatable fields (they are never handed out: only their proxies are).
metas.CircuitBreaker = { __index = {}, __newindex = cbNewIndex, __tostring = method("failure_tostring") }

local newProxy, bindBreaker = raw.new_proxy, raw.bind_breaker
function CircuitBreaker.new(config)
  local handle, address, listened = check(raw.failure_new(config))
  -- Its own recordSuccess and shouldAllowOperation: C functions (capi.rs) that call the core
  -- straight from the Lua stack when `self` is this breaker and the class's method is still the
  -- original one (through the method's raw function when the breaker has Lua listeners);
  -- anything else they hand to the class's method.
  local own = setmetatable({}, {
    __index = function(_, key)
      local m = CircuitBreaker[key]
      if m ~= nil then
        return m
      end
      if SEED_FIELDS[key] then
        return check(fieldRaw(handle, key))
      end
      return nil
    end,
  })
  local cb = newProxy({
    __index = own,
    __newindex = cbNewIndex,
    __tostring = cbToString,
    __name = "agentbreaker.CircuitBreaker",
    __metatable = false,
  }, listened)
  own.recordSuccess, own.shouldAllowOperation = bindBreaker(cb, address, handle, CircuitBreaker,
    recordSuccessFast, shouldAllowFast)
  handleOf[cb] = handle
  return cb
end

-- How a CircuitBreaker that is not quiet reports the seed's lines: `print` for the opening and the
-- other transitions, `warn` for the warning where the host has `warn` (Lua 5.4; shown only after
-- warn("@on") or with `lua -W`), else `print` (LuaJIT, Lua 5.1). Globals are read at each call, so
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
-- StagnationBreaker (SPEC 3)

local StagnationBreaker = {}
M.StagnationBreaker = StagnationBreaker
-- The hot path, once per iteration: `recordProgress` and `check` are C functions (capi.rs) that
-- take a breaker without Lua listeners (and for recordProgress a plain metrics table) straight
-- into the core; they find the breaker by object in `stagnationCells` (a cell: a reference to
-- the core breaker of its own, and whether it may have Lua listeners). Every other case they
-- hand to the Lua methods below (`slowRecordProgress`, `slowCheck`) before anything happened.
local stagnationCells = byObject()
local newStagnationCell = raw.new_stagnation_cell
function StagnationBreaker.new(config)
  local sb, address, listened = check(raw.stagnation_new(config))
  stagnationCells[sb] = newStagnationCell(address, listened)
  return sb
end
StagnationBreaker.recordError = method("stagnation_record_error")
StagnationBreaker.recordStep = method("stagnation_record_step")

-- Where the C function does not go into the core itself (a breaker with Lua listeners, an
-- argument that is not plain, ...). A plain metrics table (no metatable, no keys but the three
-- counts) goes to the raw function as three values; the raw function takes counts that are whole
-- numbers >= 0 (or nil). Anything else takes the ordinary path, which converts the whole table
-- and reports what is wrong.
local METRIC_KEYS = { filesChanged = true, testsPassing = true, outputLength = true }
local recordProgressChecked = method("stagnation_record_progress")
local recordProgressFast = raw.stagnation_record_progress_fast
local function slowRecordProgress(self, metrics)
  if type(metrics) == "table" and getmetatable(metrics) == nil then
    local plain = true
    for key in next, metrics do
      if METRIC_KEYS[key] == nil then
        plain = false
        break
      end
    end
    if plain then
      local done, err = recordProgressFast(self, metrics.filesChanged, metrics.testsPassing,
        metrics.outputLength)
      if done then
        return
      elseif err ~= nil then
        error(err, 0)
      end
    end
  end
  return recordProgressChecked(self, metrics)
end

-- Results are marked objects, as every table the module returns.
local objectMeta = raw.object_mt
local STATE_NAMES = { "CLOSED", "HALF_OPEN", "OPEN" } -- the raw functions' state numbers
local checkFast = raw.stagnation_check_fast
local function slowCheck(self)
  local allowContinue, state, reason = checkFast(self)
  if allowContinue == nil then
    error(reason, 0)
  end
  return setmetatable({ allowContinue = allowContinue, state = STATE_NAMES[state], reason = reason },
    objectMeta)
end
StagnationBreaker.recordProgress, StagnationBreaker.check = raw.bind_stagnation(stagnationCells,
  slowRecordProgress, slowCheck, objectMeta)
StagnationBreaker.getStatus = method("stagnation_get_status")
StagnationBreaker.reset = method("stagnation_reset")
StagnationBreaker.snapshot = method("stagnation_snapshot")
StagnationBreaker.restore = method("stagnation_restore")
listenerMethods(StagnationBreaker, "stagnation")
markListened(StagnationBreaker, stagnationCells)
metas.StagnationBreaker = {
  __index = StagnationBreaker,
  __newindex = readOnly("StagnationBreaker"),
  __tostring = method("stagnation_tostring"),
}

---------------------------------------------------------------------------------------------
-- BudgetBreaker (SPEC 4)

local BudgetBreaker = {}
M.BudgetBreaker = BudgetBreaker
-- The hot path, once per event of the stream. `ingest` is a C function (capi.rs) that takes a
-- plain `tool_use` or `assistant` event given to a breaker without Lua listeners straight into
-- the core, without a conversion to JSON; it finds the breaker by object in `budgetCells` (see
-- the StagnationBreaker's). Every other case it hands to `ingestSlow` (before anything
-- happened), where a raw function takes the event as the kind, string and taskId that
-- `plainEvent` (C) finds in it, or whole when it is not plain (and converts it), checks `self`
-- and returns an error as its text.
local budgetCells = byObject()
local newBudgetCell = raw.new_budget_cell
function BudgetBreaker.new(config)
  local bb, address, listened = check(raw.budget_new(config))
  budgetCells[bb] = newBudgetCell(address, listened)
  return bb
end

local ingestFast, plainEvent = raw.budget_ingest_fast, raw.plain_event
local function ingestSlow(self, event)
  local halt, err
  local kind, payload, taskId = plainEvent(event)
  if kind then
    halt, err = ingestFast(self, nil, kind, payload, taskId)
  else
    halt, err = ingestFast(self, event)
  end
  if err ~= nil then
    error(err, 0)
  end
  return halt
end
BudgetBreaker.ingest = raw.bind_ingest(budgetCells, ingestSlow, raw.budget_take_pending)
BudgetBreaker.tick = method("budget_tick")
BudgetBreaker.snapshot = method("budget_snapshot")
BudgetBreaker.reset = method("budget_reset")
listenerMethods(BudgetBreaker, "budget")
markListened(BudgetBreaker, budgetCells)
metas.BudgetBreaker = {
  __index = BudgetBreaker,
  __newindex = readOnly("BudgetBreaker"),
  __tostring = method("budget_tostring"),
}

---------------------------------------------------------------------------------------------
-- Analyzer, exit strategies and fix plans (SPEC 5)

function M.analyze(text)
  return check(raw.analyze(text))
end

function M.fingerprint(text, mode)
  return check(raw.fingerprint(text, mode))
end

local ExitStrategy = {}
M.ExitStrategy = ExitStrategy
function ExitStrategy.new(config)
  return check(raw.strategy_new(config))
end
ExitStrategy.shouldExit = method("strategy_should_exit")
ExitStrategy.getStatus = method("strategy_get_status")
ExitStrategy.reset = method("strategy_reset")
listenerMethods(ExitStrategy, "strategy")
metas.ExitStrategy = {
  __index = ExitStrategy,
  __newindex = readOnly("ExitStrategy"),
  __tostring = method("strategy_tostring"),
}

-- A fix plan is an ExitStrategy of type fix_plan, built from `{steps = {...}}` or `{markdown = ...}`.
M.FixPlan = {
  new = function(config)
    return check(raw.fix_plan_new(config))
  end,
  fromMarkdown = function(text, options)
    return check(raw.fix_plan_from_markdown(text, options))
  end,
}

---------------------------------------------------------------------------------------------
-- Loop (SPEC 5) and configuration from the environment (SPEC 7)

local Loop = {}
M.Loop = Loop
function Loop.new(config)
  return check(raw.loop_new(config))
end
Loop.observe = method("loop_observe")
Loop.getStatus = method("loop_get_status")
Loop.reset = method("loop_reset")
listenerMethods(Loop, "loop")
metas.Loop = {
  __index = Loop,
  __newindex = readOnly("Loop"),
  __tostring = method("loop_tostring"),
}

function M.configFromEnv(env)
  return check(raw.config_from_env(env))
end

return M, metas, seedLog
