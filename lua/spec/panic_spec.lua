-- The panic boundary: a Rust panic inside the core surfaces as a Lua error string beginning with
-- "INTERNAL: ", the interpreter goes on, and the object that panicked keeps working.
--
-- Needs the module built with the `test-panic` feature (`make test-lua-panic` builds it into
-- target/lua-test-panic/ and runs this file; the ordinary runs leave it out): with it,
-- CircuitBreaker:recordFailure and agentbreaker.analyze panic inside the core when given
-- TRIGGER (agentbreaker::TEST_PANIC_TRIGGER), recordFailure while holding the breaker's lock.

local ab = require("agentbreaker")

local TRIGGER = "agentbreaker:test-panic"

local function expectInternal(fn, ...)
  local ok, err = pcall(fn, ...)
  assert.is_false(ok, "the call should have raised INTERNAL")
  assert.is_string(err, "errors are strings, got " .. type(err))
  assert.truthy(err:find("^INTERNAL: "), "not an INTERNAL error: " .. err)
  return err
end

describe("a panic in the core (" .. (jit and jit.version or _VERSION) .. ")", function()
  it("is this build's: the trigger panics (built with test-panic)", function()
    local err = expectInternal(ab.analyze, TRIGGER)
    assert.truthy(err:find("panic", 1, true), err)
  end)

  it("raises INTERNAL from recordFailure, and the breaker keeps counting and opening", function()
    local clock = ab.ManualClock.new(0)
    local events = {}
    local cb = ab.CircuitBreaker.new({ quiet = true, clock = clock, failureThreshold = 3,
      listeners = { function(e) events[#events + 1] = e.type .. ":" .. (e.to or "") end } })
    cb:recordFailure("first")
    expectInternal(cb.recordFailure, cb, TRIGGER)
    -- The panic struck inside the breaker's lock, before the failure counted: the count is
    -- the one before, and the lock is usable.
    assert.are.equal(1, cb.consecutiveFailures)
    assert.are.equal("CLOSED", cb.state)
    cb:recordFailure("second")
    cb:recordFailure("third")
    assert.are.equal("OPEN", cb.state)
    assert.are.equal(3, cb.consecutiveFailures)
    local allowed, message = cb:shouldAllowOperation()
    assert.is_false(allowed)
    assert.are.equal("Circuit breaker OPEN. 30 seconds remaining in cooldown. 3 consecutive failures "
      .. "detected. Human intervention required.", message)
    assert.are.same({ "stateChange:OPEN" }, events) -- (no warning: the threshold is 3)
    -- ... and recovers as usual.
    clock:set(30000)
    assert.is_true((cb:shouldAllowOperation()))
    cb:recordSuccess()
    assert.are.equal("CLOSED", cb.state)
    assert.are.equal(0, cb.consecutiveFailures)
    assert.are.equal(1, cb:metrics().recoveries)
  end)

  it("raises INTERNAL from a guarded call whose error is the trigger, and the breaker goes on", function()
    local cb = ab.CircuitBreaker.new({ quiet = true })
    expectInternal(cb.call, cb, function() error(TRIGGER, 0) end)
    assert.are.same({ true, 42 }, { cb:pcall(function() return 42 end) })
    cb:recordFailure("after")
    assert.are.equal(1, cb.consecutiveFailures)
  end)

  it("raises INTERNAL from analyze, and analyze works on the next text", function()
    expectInternal(ab.analyze, TRIGGER)
    local analysis = ab.analyze("All tasks complete. 12 tests passed.")
    assert.is_true(analysis.completionSignal.detected)
    assert.are.equal(12, analysis.testsPassing)
  end)

  it("raises INTERNAL where analyze runs inside other objects, which keep working", function()
    local strategy = ab.ExitStrategy.new({ type = "auto" })
    expectInternal(strategy.shouldExit, strategy, TRIGGER)
    assert.are.same({ exit = true, reason = "completed" }, strategy:shouldExit("EXIT_SIGNAL: true"))

    local loop = ab.Loop.new({ maxIterations = 5 })
    expectInternal(loop.observe, loop, { output = TRIGGER })
    local decision = loop:observe({ output = "Working on it.", filesChanged = 1 })
    assert.are.equal("continue", decision.action)
    -- (The panicked observation still counted an iteration: the core counts before it
    -- analyzes. Reported; not asserted either way here.)
    decision = loop:observe({ output = "EXIT_SIGNAL: true" })
    assert.are.equal("exit", decision.action)
    assert.are.equal("completed", decision.reason)
  end)

  it("leaves the interpreter running: many panics in a row", function()
    local cb = ab.CircuitBreaker.new({ quiet = true })
    for _ = 1, 100 do
      expectInternal(cb.recordFailure, cb, TRIGGER)
    end
    cb:recordFailure("x")
    assert.are.equal(1, cb.consecutiveFailures)
    assert.are.equal(1, #cb.failureHistory)
  end)
end)
