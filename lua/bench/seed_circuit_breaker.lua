-- TRANSCRIBED FROM SEED 004 (docs/contract.md lists the seeds at its top: the Lua CircuitBreaker
-- case study, its src/safety/CircuitBreaker.lua:28-112) FOR BENCHMARKING ONLY: the pure-Lua peer
-- that lua/bench/bench.lua measures agentbreaker's CircuitBreaker against. Not part of the module, not
-- used by any test of behaviour.
--
-- The seed's code is kept as written, with two changes, both needed to run it at all:
-- - `new()` sets the class as the metatable of the table it returns (the seed's returns a plain
--   table, so `cb:recordSuccess()` would fail: there is no method on it);
-- - `warn` is looked up as a global only where the host has it (LuaJIT and Lua 5.1 have no
--   `warn`; the seed ran on Luau). The benchmark's closed path never reaches it.
-- The class is returned as a module instead of being a file-level local.

local CircuitBreaker = {}
CircuitBreaker.__index = CircuitBreaker

local warn = warn or print -- luacheck: ignore 113

function CircuitBreaker.new()
    return setmetatable({
        state = "CLOSED",  -- CLOSED | OPEN | HALF_OPEN
        consecutiveFailures = 0,
        threshold = 5,
        cooldownSeconds = 30,
        openedAt = nil,
        failureHistory = {},
    }, CircuitBreaker)
end

function CircuitBreaker:recordSuccess()
    self.consecutiveFailures = 0

    if self.state == "HALF_OPEN" then
        print("[Circuit Breaker] Test operation succeeded. Closing circuit.")
        self.state = "CLOSED"
        self.openedAt = nil
    end
end

function CircuitBreaker:recordFailure(error)
    self.consecutiveFailures = self.consecutiveFailures + 1

    table.insert(self.failureHistory, {
        timestamp = os.time(),
        error = error,
        state = self.state,
    })

    -- Warning at 3 failures
    if self.consecutiveFailures == 3 then
        warn("[Circuit Breaker] Warning: 3 consecutive failures. 2 more will open circuit.")
    end

    -- Open circuit at 5 failures
    if self.consecutiveFailures >= self.threshold then
        if self.state ~= "OPEN" then
            print("[Circuit Breaker] OPENED: 5 consecutive failures detected.")
            self.state = "OPEN"
            self.openedAt = os.time()
        end
    end
end

function CircuitBreaker:shouldAllowOperation()
    -- CLOSED state: normal operation
    if self.state == "CLOSED" then
        return true, nil
    end

    -- OPEN state: check if cooldown expired
    if self.state == "OPEN" then
        local elapsed = os.time() - self.openedAt

        if elapsed >= self.cooldownSeconds then
            print("[Circuit Breaker] Cooldown expired. Entering HALF_OPEN state.")
            self.state = "HALF_OPEN"
            return true, "Circuit breaker testing - one operation allowed"
        else
            local remaining = self.cooldownSeconds - elapsed
            return false, string.format(
                "Circuit breaker OPEN. %d seconds remaining in cooldown. " ..
                "5 consecutive failures detected. Human intervention required.",
                remaining
            )
        end
    end

    -- HALF_OPEN state: allow one test operation
    if self.state == "HALF_OPEN" then
        return true, "Circuit breaker testing - success will close, failure will re-open"
    end

    return false, "Unknown circuit breaker state"
end

function CircuitBreaker:getStatus()
    return {
        state = self.state,
        consecutiveFailures = self.consecutiveFailures,
        threshold = self.threshold,
        failureHistory = self.failureHistory,
    }
end

return CircuitBreaker
