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
local floor, huge = math.floor, math.huge
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

-- The objects each class made, as weak keys: a hot-path method checks `self` with one table
-- lookup and then calls a raw function that takes the object straight from the Lua stack; with
-- anything else it calls the ordinary raw function, which reports the misuse.
local function objectSet()
  return setmetatable({}, { __mode = "k" })
end

local function readOnly(class)
  return function(_, key)
    error(("INVALID_ARGUMENT: %s objects are read-only (cannot set %s); "
      .. "configure them through %s.new({...})"):format(class, tostring(key), class), 0)
  end
end

-- Adds the listener methods every event source has.
local function listenerMethods(class, prefix)
  class.addListener = method(prefix .. "_add_listener")
  class.removeListener = method(prefix .. "_remove_listener")
  class.listenerErrors = method(prefix .. "_listener_errors")
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

local circuitBreakers = objectSet()

function CircuitBreaker.new(config)
  local cb = check(raw.failure_new(config))
  circuitBreakers[cb] = true
  return cb
end

CircuitBreaker.recordFailure = method("failure_record_failure")

-- The hot path, once per agent step: no varargs, no tables, no allocation.
local recordSuccessChecked = method("failure_record_success")
local recordSuccessFast = raw.failure_record_success_fast
function CircuitBreaker.recordSuccess(self)
  if circuitBreakers[self] then
    local err = recordSuccessFast(self)
    if err ~= nil then
      error(err, 0)
    end
    return
  end
  return recordSuccessChecked(self)
end

local shouldAllowChecked = method("failure_should_allow_operation")
local shouldAllowFast = raw.failure_should_allow_operation_fast
function CircuitBreaker.shouldAllowOperation(self)
  if circuitBreakers[self] then
    local allowed, message = shouldAllowFast(self)
    if allowed == nil then
      error(message, 0)
    end
    return allowed, message
  end
  return shouldAllowChecked(self)
end
CircuitBreaker.getStatus = method("failure_get_status")
CircuitBreaker.metrics = method("failure_metrics")
CircuitBreaker.reset = method("failure_reset")
CircuitBreaker.snapshot = method("failure_snapshot")
CircuitBreaker.restore = method("failure_restore")
CircuitBreaker.save = method("failure_save")
CircuitBreaker.load = method("failure_load")
listenerMethods(CircuitBreaker, "failure")

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
function CircuitBreaker.call(self, fn, ...)
  check(raw.failure_acquire(self, fn))
  local results = pack(pcall(fn, ...))
  if results[1] then
    CircuitBreaker.recordSuccess(self)
    return unpack(results, 2, results.n)
  end
  check(raw.failure_record_failure(self, errorText(results[2])))
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

metas.CircuitBreaker = {
  __index = function(self, key)
    local m = CircuitBreaker[key]
    if m ~= nil then
      return m
    end
    if SEED_FIELDS[key] then
      return check(raw.failure_field(self, key))
    end
    return nil
  end,
  __newindex = function(_, key)
    local how = SEED_FIELDS[key]
    if how then
      error(("INVALID_ARGUMENT: CircuitBreaker.%s is read-only; use %s"):format(key, how), 0)
    end
    error(("INVALID_ARGUMENT: CircuitBreaker objects are read-only (cannot set %s); "
      .. "add methods to the CircuitBreaker class table instead"):format(tostring(key)), 0)
  end,
  __tostring = method("failure_tostring"),
}

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
local stagnationBreakers = objectSet()
function StagnationBreaker.new(config)
  local sb = check(raw.stagnation_new(config))
  stagnationBreakers[sb] = true
  return sb
end
StagnationBreaker.recordError = method("stagnation_record_error")
StagnationBreaker.recordStep = method("stagnation_record_step")

-- The hot path, once per iteration. A plain metrics table (no metatable, no keys but the three
-- counts) goes to the raw function as three values; the raw function takes counts that are whole
-- numbers >= 0 (or nil). Anything else takes the ordinary path, which converts the whole table
-- and reports what is wrong.
local METRIC_KEYS = { filesChanged = true, testsPassing = true, outputLength = true }
local recordProgressChecked = method("stagnation_record_progress")
local recordProgressFast = raw.stagnation_record_progress_fast
function StagnationBreaker.recordProgress(self, metrics)
  if stagnationBreakers[self] and type(metrics) == "table" and getmetatable(metrics) == nil then
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
local checkChecked = method("stagnation_check")
local checkFast = raw.stagnation_check_fast
function StagnationBreaker.check(self)
  if stagnationBreakers[self] then
    local allowContinue, state, reason = checkFast(self)
    if allowContinue == nil then
      error(reason, 0)
    end
    return setmetatable({ allowContinue = allowContinue, state = STATE_NAMES[state], reason = reason },
      objectMeta)
  end
  return checkChecked(self)
end
StagnationBreaker.getStatus = method("stagnation_get_status")
StagnationBreaker.reset = method("stagnation_reset")
StagnationBreaker.snapshot = method("stagnation_snapshot")
StagnationBreaker.restore = method("stagnation_restore")
listenerMethods(StagnationBreaker, "stagnation")
metas.StagnationBreaker = {
  __index = StagnationBreaker,
  __newindex = readOnly("StagnationBreaker"),
  __tostring = method("stagnation_tostring"),
}

---------------------------------------------------------------------------------------------
-- BudgetBreaker (SPEC 4)

local BudgetBreaker = {}
M.BudgetBreaker = BudgetBreaker
local budgetBreakers = objectSet()
function BudgetBreaker.new(config)
  local bb = check(raw.budget_new(config))
  budgetBreakers[bb] = true
  return bb
end

-- Whether a value certainly converts to JSON (see convert.rs): a string, a boolean, a finite
-- number, or a table without metatable whose keys are all strings or exactly 1..n and whose
-- values are such values, at most 16 deep. (No means: let the full conversion decide.)
local function plainJson(value, depth)
  local kind = type(value)
  if kind == "string" or kind == "boolean" then
    return true
  elseif kind == "number" then
    return value == value and value ~= huge and value ~= -huge
  elseif kind ~= "table" or depth > 16 or getmetatable(value) ~= nil then
    return false
  end
  local named, indexed, last = false, 0, 0
  for key, item in next, value do
    if type(key) == "string" then
      named = true
    elseif type(key) == "number" and key >= 1 and key == floor(key) then
      indexed = indexed + 1
      if key > last then
        last = key
      end
    else
      return false
    end
    if not plainJson(item, depth + 1) then
      return false
    end
  end
  return not (named and indexed > 0) and last == indexed
end

-- The hot path, once per event of the stream: a plain `tool_use` or `assistant` event (no
-- metatable; only the keys below, each a plain value) goes to the raw function as its kind, name
-- or text and taskId. Anything else takes the ordinary path (the whole event converted to JSON).
local TOOL_USE_KEYS = { type = true, name = true, taskId = true, input = true }
local ASSISTANT_KEYS = { type = true, text = true, taskId = true }
local ingestChecked = method("budget_ingest")
local ingestFast = raw.budget_ingest_fast
function BudgetBreaker.ingest(self, event)
  if budgetBreakers[self] and type(event) == "table" and getmetatable(event) == nil then
    local kind, taskId = event.type, event.taskId
    local keys, payload
    if kind == "tool_use" then
      keys, payload = TOOL_USE_KEYS, event.name
    elseif kind == "assistant" then
      keys, payload = ASSISTANT_KEYS, event.text
    end
    if keys and type(payload) == "string" and (taskId == nil or type(taskId) == "string") then
      local plain = true
      for key, value in next, event do
        if keys[key] == nil or (key == "input" and not plainJson(value, 1)) then
          plain = false
          break
        end
      end
      if plain then
        local halt, err = ingestFast(self, keys == TOOL_USE_KEYS, payload, taskId)
        if err ~= nil then
          error(err, 0)
        end
        return halt
      end
    end
  end
  return ingestChecked(self, event)
end
BudgetBreaker.tick = method("budget_tick")
BudgetBreaker.snapshot = method("budget_snapshot")
BudgetBreaker.reset = method("budget_reset")
listenerMethods(BudgetBreaker, "budget")
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
