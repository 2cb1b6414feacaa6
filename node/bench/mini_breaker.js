'use strict'
// The peer of the benchmark's direct calls (shouldAllowOperation + recordSuccess): the smallest
// pure-JavaScript consecutive-failure breaker with the same answers on the closed path
// (`{allowed, message}`), so the figure is the floor a breaker without a native crossing sets.
// It has none of agentbreaker's warning, backoff, probe limits, history, metrics, events or
// persistence. Not part of the package.

class MiniBreaker {
  constructor({ failureThreshold = 5, cooldownMs = 30_000, now = Date.now } = {}) {
    this.failureThreshold = failureThreshold
    this.cooldownMs = cooldownMs
    this.now = now
    this.state = 'CLOSED'
    this.consecutiveFailures = 0
    this.openedAt = 0
  }

  shouldAllowOperation() {
    if (this.state === 'CLOSED') {
      return { allowed: true, message: null }
    }
    if (this.state === 'OPEN') {
      const remaining = this.openedAt + this.cooldownMs - this.now()
      if (remaining > 0) {
        return { allowed: false, message: `open: ${Math.ceil(remaining / 1000)} s remaining` }
      }
      this.state = 'HALF_OPEN'
      return { allowed: true, message: 'probe' }
    }
    return { allowed: false, message: 'probe in progress' }
  }

  recordSuccess() {
    this.consecutiveFailures = 0
    this.state = 'CLOSED'
  }

  recordFailure() {
    this.consecutiveFailures++
    if (this.state === 'HALF_OPEN' || this.consecutiveFailures >= this.failureThreshold) {
      this.state = 'OPEN'
      this.openedAt = this.now()
    }
  }
}

module.exports = { MiniBreaker }
