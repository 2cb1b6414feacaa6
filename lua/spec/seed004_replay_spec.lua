-- Seed 004's "Path Hallucination Loop" replayed against CircuitBreaker.new(), code written against
-- the seed's Lua breaker unchanged: every line printed (the agent's lines and the breaker's
-- `[Circuit Breaker] ...` lines, in order), the warning at 3 failures, the refusal with "30 seconds
-- remaining" right after opening, the countdown at later clock times, and the recovery through
-- HALF_OPEN after the user's fix.
--
-- Where the contract and the seed differ the contract wins: one warning, at the third failure (the seed's
-- transcript shows one per failure), and a second shouldAllowOperation() in HALF_OPEN is refused
-- while the test operation's result is awaited (the seed allowed it).

local ab = require("agentbreaker")
local CircuitBreaker = ab.CircuitBreaker

local HAS_WARN = type(warn) == "function"
-- Where the seed's warn() line goes: warn on Lua 5.4, print where the host has no warn.
local WARN = HAS_WARN and "warn" or "print"

local GUESSES = {
  "ServerScriptService.MainScript",
  "ServerScriptService.Main",
  "ServerScriptService.Scripts.Main",
  "ServerScriptService.Core.Main",
  "ServerScriptService.MainHandler",
  "ServerScriptService.MainController",
}

local REFUSAL = "Circuit breaker OPEN. %d seconds remaining in cooldown. "
  .. "5 consecutive failures detected. Human intervention required."

-- Runs body with print (and warn, where the host has it) captured; returns the lines, each
-- prefixed with the channel ("print " / "warn ").
local function capture(body)
  local lines = {}
  local savedPrint, savedWarn = _G.print, _G.warn
  _G.print = function(...)
    local parts = {}
    for i = 1, select("#", ...) do
      parts[i] = tostring((select(i, ...)))
    end
    lines[#lines + 1] = "print " .. table.concat(parts, "\t")
  end
  if HAS_WARN then
    _G.warn = function(...)
      lines[#lines + 1] = "warn " .. table.concat({ ... })
    end
  end
  local ok, err = pcall(body)
  _G.print, _G.warn = savedPrint, savedWarn
  assert(ok, err)
  return lines
end

-- The agent loop of the transcript, written as seed-era code would: ask, try, record.
local function agentLoop(cb, clock)
  for i, path in ipairs(GUESSES) do
    if clock then
      clock:set((i < 5 and i - 1 or 4) * 4000) -- one guess every 4 s, the 6th right after the 5th
    end
    print(("[Iteration %d] AI: Read script %q"):format(i, path))
    local allowed, message = cb:shouldAllowOperation()
    if not allowed then
      print("[Tool] Blocked: " .. message)
      return i
    end
    print("[Tool] Error: Path not found")
    cb:recordFailure("Path not found: " .. path)
  end
end

local TRANSCRIPT = {
  'print [Iteration 1] AI: Read script "ServerScriptService.MainScript"',
  "print [Tool] Error: Path not found",
  'print [Iteration 2] AI: Read script "ServerScriptService.Main"',
  "print [Tool] Error: Path not found",
  'print [Iteration 3] AI: Read script "ServerScriptService.Scripts.Main"',
  "print [Tool] Error: Path not found",
  WARN .. " [Circuit Breaker] Warning: 3 consecutive failures. 2 more will open circuit.",
  'print [Iteration 4] AI: Read script "ServerScriptService.Core.Main"',
  "print [Tool] Error: Path not found",
  'print [Iteration 5] AI: Read script "ServerScriptService.MainHandler"',
  "print [Tool] Error: Path not found",
  "print [Circuit Breaker] OPENED: 5 consecutive failures detected.",
  'print [Iteration 6] AI: Read script "ServerScriptService.MainController"',
  "print [Tool] Blocked: " .. REFUSAL:format(30),
}

describe("seed 004 path-hallucination loop (" .. (jit and jit.version or _VERSION) .. ")", function()
  it("CircuitBreaker.new() prints the transcript and blocks the 6th attempt with 30 s left", function()
    local cb, blockedAt
    local lines = capture(function()
      cb = CircuitBreaker.new()
      blockedAt = agentLoop(cb)
    end)
    assert.are.same(TRANSCRIPT, lines)
    assert.are.equal(6, blockedAt)
    assert.are.equal("OPEN", cb.state)
    assert.are.equal(5, cb.consecutiveFailures)
    assert.are.equal(5, #cb.failureHistory)
    for i, entry in ipairs(cb.failureHistory) do
      assert.are.equal("Path not found: " .. GUESSES[i], entry.error)
      assert.are.equal("CLOSED", entry.state)
      assert.truthy(math.abs(entry.timestamp - os.time()) <= 5) -- the seed's os.time() seconds
    end
    assert.truthy(math.abs(cb.openedAt - os.time()) <= 5)
  end)

  it("counts down, enters HALF_OPEN after 30 s and closes after the user's fix", function()
    local clock = ab.ManualClock.new(0)
    local cb
    local lines = capture(function()
      -- new() with the contract's clock option: everything else is the seed's default
      cb = CircuitBreaker.new({ clock = clock })
      assert.are.equal(5, cb.threshold)
      assert.are.equal(30, cb.cooldownSeconds)
      agentLoop(cb, clock)
    end)
    assert.are.same(TRANSCRIPT, lines)
    assert.are.equal(16, cb.openedAt) -- opened by the 5th failure, at 16 s

    -- The seed's "User sees: ... 28 / 15 / 5 seconds remaining"
    for _, case in ipairs({ { 18000, 28 }, { 31000, 15 }, { 41000, 5 }, { 45999, 1 } }) do
      clock:set(case[1])
      local allowed, message = cb:shouldAllowOperation()
      assert.is_false(allowed)
      assert.are.equal(REFUSAL:format(case[2]), message)
    end

    -- "After 30s: Cooldown expired. Entering HALF_OPEN state." and one test operation
    clock:set(46000)
    local allowed, message
    lines = capture(function()
      allowed, message = cb:shouldAllowOperation()
    end)
    assert.are.same({ "print [Circuit Breaker] Cooldown expired. Entering HALF_OPEN state." }, lines)
    assert.is_true(allowed)
    assert.are.equal("Circuit breaker testing - one operation allowed", message)
    assert.are.equal("HALF_OPEN", cb.state)
    assert.are.equal(16, cb.openedAt) -- HALF_OPEN keeps openedAt

    -- The contract over the seed: a second caller waits for the test operation's result
    allowed, message = cb:shouldAllowOperation()
    assert.is_false(allowed)
    assert.are.equal("Circuit breaker testing - waiting for the test operation's result", message)

    -- The user provides the correct path "ServerScriptService.Main.server"; the test succeeds
    lines = capture(function()
      print('[Iteration 7] AI: Read script "ServerScriptService.Main.server"')
      cb:recordSuccess()
    end)
    assert.are.same({
      'print [Iteration 7] AI: Read script "ServerScriptService.Main.server"',
      "print [Circuit Breaker] Test operation succeeded. Closing circuit.",
    }, lines)
    assert.are.equal("CLOSED", cb.state)
    assert.are.equal(0, cb.consecutiveFailures)
    assert.is_nil(cb.openedAt)
    assert.are.same({ true, nil }, { cb:shouldAllowOperation() })
  end)

  it("re-opens for another 30 s when the test operation fails", function()
    local clock = ab.ManualClock.new(0)
    local cb
    capture(function()
      cb = CircuitBreaker.new({ clock = clock })
      for _ = 1, 5 do
        cb:recordFailure("Path not found")
      end
    end)
    clock:set(30000)
    local lines = capture(function()
      assert.is_true((cb:shouldAllowOperation()))
      cb:recordFailure("Path not found: ServerScriptService.Main")
    end)
    assert.are.same({
      "print [Circuit Breaker] Cooldown expired. Entering HALF_OPEN state.",
      "print [Circuit Breaker] OPENED: 5 consecutive failures detected.",
    }, lines)
    assert.are.equal("OPEN", cb.state)
    assert.are.equal(30, cb.openedAt)
    clock:set(31000)
    assert.are.same({ false, REFUSAL:format(29) }, { cb:shouldAllowOperation() })
  end)

  it("keeps getStatus() as the seed's code read it", function()
    local clock = ab.ManualClock.new(1706234567000)
    local cb = CircuitBreaker.new({ clock = clock, quiet = true })
    cb:recordFailure("Path not found: ServerScriptService.MainScript")
    local status = cb:getStatus()
    assert.are.equal("CLOSED", status.state)
    assert.are.equal(1, status.consecutiveFailures)
    assert.are.equal(5, status.threshold)
    -- the seed's failure-history entry, plus the contract's atMs
    assert.are.same({
      timestamp = 1706234567,
      atMs = 1706234567000,
      error = "Path not found: ServerScriptService.MainScript",
      state = "CLOSED",
    }, status.failureHistory[1])
  end)
end)
