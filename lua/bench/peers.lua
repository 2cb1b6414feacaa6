-- Minimal pure-Lua equivalents of the StagnationBreaker and the BudgetBreaker (docs/contract.md),
-- written FOR BENCHMARKING ONLY (lua/bench/bench.lua): the peers that agentbreaker's native
-- objects are measured against. Each does the same observable work as the core does for the
-- operations measured, and no more:
--
-- - StagnationPeer:recordProgress({filesChanged, testsPassing, outputLength}) validates the three
--   counts (whole numbers >= 0, no other keys), decides progress (files changed, or more tests
--   passing than the best so far), the output decline against the mean of the first three
--   outputs, keeps the last 10 outputs, the no-progress counter, the error counts (cleared on
--   progress), lastProgress, and the CLOSED -> HALF_OPEN -> CLOSED/OPEN transitions with their
--   reasons; check() returns a new {allowContinue, state, reason} table.
-- - BudgetPeer:ingest(event) validates the event as the core does for the kinds measured
--   (a table with a string `type`; `tool_use` needs a string `name`; `assistant` a string `text`;
--   `taskId` nil or a string of 1..256 bytes; and, as for every event the module takes, string
--   keys and values that have a JSON form: no functions, userdata or threads, no NaN or
--   infinities, tables (read raw) that are objects or 1..n lists, so that `input = {f = print}`
--   is refused as agentbreaker refuses it), attributes it (its taskId, else the top of the
--   stack, else the implicit "session" task, opened on first use), refreshes the task's idle
--   timer, and then: tool_use counts one tool call and halts above maxToolCallsPerTask;
--   assistant keeps the last loopWindow outputs as whitespace-token sets (at most
--   maxTokensPerOutput tokens) and halts when every consecutive pair has Jaccard >= the
--   threshold (two empty sets compare as 1.0); both check the task's duration. A halted task
--   ignores later events. Returns the halt table or nil.
--
-- They are not the product: no listeners, persistence, other event kinds or error fingerprints.
-- bench.lua checks on every run that each peer reaches the same results as agentbreaker on the
-- sequences it measures, so the comparison stays like for like.

local floor, huge = math.floor, math.huge
local type, next, pairs = type, next, pairs
local gmatch = string.gmatch

local M = {}

-- Milliseconds of a clock shared by the peers: os.time() (whole seconds) is as cheap as a clock
-- read gets in plain Lua.
local function nowMs()
  return os.time() * 1000
end
M.nowMs = nowMs

local function wholeCount(v)
  return type(v) == "number" and v >= 0 and v == floor(v) and v < huge
end

---------------------------------------------------------------------------------------------
-- StagnationPeer

local StagnationPeer = {}
StagnationPeer.__index = StagnationPeer
M.StagnationPeer = StagnationPeer

local TREND_LEN = 10
local METRIC_KEYS = { filesChanged = true, testsPassing = true, outputLength = true }

function StagnationPeer.new(config)
  config = config or {}
  return setmetatable({
    noProgressThreshold = config.noProgressThreshold or 3,
    outputDeclineThreshold = config.outputDeclineThreshold or 70,
    state = "CLOSED",
    reason = nil,
    consecutiveNoProgress = 0,
    bestTestsPassing = 0,
    baseline = {},
    baselineSum = 0,
    trend = {},
    trendFirst = 1,
    trendCount = 0,
    errorCounts = {},
    lastProgress = nil,
  }, StagnationPeer)
end

function StagnationPeer:recordProgress(m)
  if type(m) ~= "table" then
    error("INVALID_ARGUMENT: iteration metrics must be a table", 0)
  end
  for k in pairs(m) do
    if not METRIC_KEYS[k] then
      error("INVALID_ARGUMENT: unknown key " .. tostring(k), 0)
    end
  end
  local files, tests, output = m.filesChanged or 0, m.testsPassing or 0, m.outputLength or 0
  if not (wholeCount(files) and wholeCount(tests) and wholeCount(output)) then
    error("INVALID_ARGUMENT: counts must be whole numbers >= 0", 0)
  end
  local now = nowMs()
  local progress = files > 0 or tests > self.bestTestsPassing
  local samples, sum = #self.baseline, self.baselineSum
  local declined = sum > 0 and output * 100 * samples < self.outputDeclineThreshold * sum

  if tests > self.bestTestsPassing then
    self.bestTestsPassing = tests
  end
  if samples < 3 then
    self.baseline[samples + 1] = output
    self.baselineSum = sum + output
  end
  -- The trend: a ring of the last TREND_LEN outputs.
  local trend = self.trend
  if self.trendCount < TREND_LEN then
    self.trendCount = self.trendCount + 1
    trend[self.trendCount] = output
  else
    trend[self.trendFirst] = output
    self.trendFirst = self.trendFirst % TREND_LEN + 1
  end
  if progress then
    self.consecutiveNoProgress = 0
    if next(self.errorCounts) ~= nil then
      self.errorCounts = {}
    end
    self.lastProgress = now
  else
    self.consecutiveNoProgress = self.consecutiveNoProgress + 1
  end

  local state = self.state
  if state == "HALF_OPEN" then
    if progress and not declined then
      self.state, self.reason = "CLOSED", nil
    elseif progress then
      self.state = "OPEN"
      self.reason = ("Output declined to %d%% of baseline"):format(floor(output * 100 * samples / sum))
    else
      self.state = "OPEN"
      self.reason = ("No progress in %d consecutive iterations"):format(self.consecutiveNoProgress)
    end
  elseif state == "CLOSED" and self.consecutiveNoProgress >= self.noProgressThreshold then
    self.state = "HALF_OPEN"
    self.reason = ("No progress in %d consecutive iterations"):format(self.consecutiveNoProgress)
  end
end

function StagnationPeer:check()
  return { allowContinue = self.state ~= "OPEN", state = self.state, reason = self.reason }
end

---------------------------------------------------------------------------------------------
-- BudgetPeer

local BudgetPeer = {}
BudgetPeer.__index = BudgetPeer
M.BudgetPeer = BudgetPeer

local SESSION = "session"

function BudgetPeer.new(config)
  config = config or {}
  return setmetatable({
    maxToolCallsPerTask = config.maxToolCallsPerTask or 50,
    maxTaskDurationSecs = config.maxTaskDurationSecs or 1800,
    similarityJaccardThreshold = config.similarityJaccardThreshold or 0.95,
    loopWindow = config.loopWindow or 3,
    maxTokensPerOutput = config.maxTokensPerOutput or 512,
    tasks = {},
    stack = {},
    ignoredEvents = 0,
    lastEventAt = nil,
  }, BudgetPeer)
end

-- Whether the scalar `v` of type `t` has a JSON form (tables: jsonTable).
local function jsonScalar(v, t)
  if t == "string" or t == "boolean" then
    return true
  end
  return t == "number" and v == v and v ~= huge and v ~= -huge
end

-- Whether the table `v` has a JSON form (see the header): an object or a 1..n list of values
-- that have one.
local function jsonTable(v, depth)
  if depth > 64 then
    return false
  end
  local named, count, last = false, 0, 0
  for k, x in next, v do
    if type(k) == "string" then
      named = true
    elseif type(k) == "number" and k >= 1 and k % 1 == 0 then
      count = count + 1
      if k > last then
        last = k
      end
    else
      return false
    end
    local t = type(x)
    if t == "table" then
      if not jsonTable(x, depth + 1) then
        return false
      end
    elseif not jsonScalar(x, t) then
      return false
    end
  end
  return not (named and count > 0) and last == count
end

local function tokenSet(text, max)
  local set, n = {}, 0
  for token in gmatch(text, "%S+") do
    if n >= max then
      break
    end
    n = n + 1
    set[token] = true
  end
  return set
end

local function jaccard(a, b)
  local sizeA, common, sizeB = 0, 0, 0
  for token in pairs(a) do
    sizeA = sizeA + 1
    if b[token] then
      common = common + 1
    end
  end
  for _ in pairs(b) do
    sizeB = sizeB + 1
  end
  if sizeA == 0 and sizeB == 0 then
    return 1.0
  end
  return common / (sizeA + sizeB - common)
end

function BudgetPeer:ingest(event)
  if type(event) ~= "table" then
    error("INVALID_EVENT: an event must be a table", 0)
  end
  local kind = event.type
  if type(kind) ~= "string" then
    error("INVALID_EVENT: an event needs a string type", 0)
  end
  for k, v in next, event do
    local t = type(v)
    if type(k) ~= "string" or not (t == "table" and jsonTable(v, 1) or t ~= "table" and jsonScalar(v, t)) then
      error("INVALID_EVENT: an event must be a JSON object", 0)
    end
  end
  local taskId = event.taskId
  if taskId ~= nil and (type(taskId) ~= "string" or #taskId == 0 or #taskId > 256) then
    error("INVALID_EVENT: taskId must be a string of 1..256 bytes", 0)
  end
  local payload
  if kind == "tool_use" then
    payload = event.name
    if type(payload) ~= "string" then
      error("INVALID_EVENT: a tool_use event needs a string name", 0)
    end
  elseif kind == "assistant" then
    payload = event.text
    if type(payload) ~= "string" then
      error("INVALID_EVENT: an assistant event needs a string text", 0)
    end
  else
    self.ignoredEvents = self.ignoredEvents + 1 -- (the other kinds are not measured)
    return nil
  end
  local now = nowMs()
  local id = taskId or self.stack[#self.stack] or SESSION
  self.lastEventAt = now
  local task = self.tasks[id]
  if task == nil then
    task = { id = id, startedAt = now, lastEventAt = now, toolCalls = 0, outputs = {}, halted = false }
    self.tasks[id] = task
  end
  task.lastEventAt = now
  if task.halted then
    return nil
  end
  local halt
  if kind == "tool_use" then
    task.toolCalls = task.toolCalls + 1
    if task.toolCalls > self.maxToolCallsPerTask then
      halt = { kind = "ToolCallLimit", slug = "tool_call_limit", taskId = id,
        actual = task.toolCalls, limit = self.maxToolCallsPerTask,
        message = ("tool calls: %d of %d"):format(task.toolCalls, self.maxToolCallsPerTask) }
    end
  else
    local outputs, window = task.outputs, self.loopWindow
    if #outputs >= window then
      table.remove(outputs, 1)
    end
    outputs[#outputs + 1] = tokenSet(payload, self.maxTokensPerOutput)
    if #outputs >= window then
      local smallest = huge
      for i = 1, #outputs - 1 do
        local j = jaccard(outputs[i], outputs[i + 1])
        if j < smallest then
          smallest = j
        end
      end
      if smallest >= self.similarityJaccardThreshold then
        halt = { kind = "OutputLoop", slug = "output_loop", taskId = id, windowSize = window,
          similarityJaccard = smallest, threshold = self.similarityJaccardThreshold,
          message = ("%d near-identical outputs (jaccard %.2f)"):format(window, smallest) }
      end
    end
  end
  if halt == nil then
    local ran = now - task.startedAt
    if ran > self.maxTaskDurationSecs * 1000 then
      halt = { kind = "DurationLimit", slug = "duration_limit", taskId = id,
        actualSecs = ran / 1000, limitSecs = self.maxTaskDurationSecs,
        message = ("duration: %gs of %ds"):format(ran / 1000, self.maxTaskDurationSecs) }
    end
  end
  if halt ~= nil then
    task.halted = true
  end
  return halt
end

function BudgetPeer:toolCalls(id)
  local task = self.tasks[id or SESSION]
  return task and task.toolCalls or 0
end

return M
