'use strict'
// agentbreaker/claude-agent-sdk: a Monitor on a Claude Agent SDK session
// (`@anthropic-ai/claude-agent-sdk`), as the Python adapter does it.
//
//   const { hooks, trackSpend } = require('agentbreaker/claude-agent-sdk')
//   const monitor = new Monitor()
//   for await (const message of trackSpend(monitor, query({ prompt, options: { hooks: hooks(monitor) } }))) ...
//
// `hooks(monitor)` is the `hooks` option: the SDK calls the callbacks in-process for every tool
// call of Claude Code. PreToolUse gives `tool_use`, PostToolUse and PostToolUseFailure give
// `tool_result` (ok on success only), Stop gives `assistant` (the last answer), SubagentStop ends
// the subagent's task. The answers are the ones `agentbreaker hook` gives Claude Code
// (docs/hooks.md): a warning adds the nudge as `additionalContext` (Claude reads it) and the
// message as `systemMessage` (you see it); a halt denies the call with the reason
// (`permissionDecision: 'deny'`) and stops the session (`continue: false` with `stopReason`);
// every later call of a halted task is denied. Stop is never blocked.
//
// Hook inputs carry no token counts: `trackSpend` (or `SpendTracker`) feeds the message stream's
// usage into the Monitor's spend (each assistant message's usage once per message id, then the
// result's `total_cost_usd` for what the price table did not count).
//
// Nothing of the SDK is loaded: the hooks are plain functions returning plain objects.

const {
  TAG,
  Watcher,
  haltContext,
  haltText,
  invalidArgument,
  needFramework,
  nudgeText,
  skippedText,
  toText,
  usageEvent,
  Monitor,
} = require('./_common.js')

needFramework('claude-agent-sdk', '@anthropic-ai/claude-agent-sdk', 'the Claude Agent SDK')

const EXIT_CODE = /^Exit code \d+$/

/**
 * Claude Code's failure text starts with `Exit code N` and then the output: the Monitor tells
 * errors apart by their first line, so the exit code goes to the end.
 */
function failureText(error) {
  const newline = error.indexOf('\n')
  if (newline < 0) return error
  const first = error.slice(0, newline)
  const rest = error.slice(newline + 1)
  return rest.trim() && EXIT_CODE.test(first.trim()) ? `${rest}\n${first}` : error
}

function checkMonitor(monitor, name) {
  if (!(monitor instanceof Monitor)) throw invalidArgument(`${name}() takes an agentbreaker Monitor first`)
}

class HookCallbacks {
  constructor(monitor, taskId) {
    this.watcher = new Watcher(monitor)
    this.task = taskId || ''
  }

  runOf(input) {
    const agent = input && input.agent_id
    return this.watcher.run(typeof agent === 'string' && agent ? agent : this.task)
  }

  preToolUse(input, toolUseId) {
    const run = this.runOf(input)
    const event = { type: 'tool_use', name: input.tool_name || '?', input: input.tool_input ?? null }
    const id = input.tool_use_id || toolUseId
    if (id) event.id = id
    const verdict = this.watcher.observe(run, event)
    if (run.halt !== null) {
      return {
        continue: false,
        stopReason: haltText(run.halt),
        hookSpecificOutput: {
          hookEventName: 'PreToolUse',
          permissionDecision: 'deny',
          permissionDecisionReason: skippedText(run.halt),
        },
      }
    }
    if (verdict.action === 'warn') {
      this.watcher.takeNudges(run)
      return {
        systemMessage: `${TAG} ${verdict.message}`,
        hookSpecificOutput: { hookEventName: 'PreToolUse', additionalContext: nudgeText(verdict) },
      }
    }
    return {}
  }

  post(input, toolUseId, ok, text, hookEventName) {
    const run = this.runOf(input)
    const event = { type: 'tool_result', ok, text, name: input.tool_name || '?' }
    const id = input.tool_use_id || toolUseId
    if (id) event.id = id
    const verdict = this.watcher.observe(run, event)
    if (run.halt !== null) {
      return {
        continue: false,
        stopReason: haltText(run.halt),
        hookSpecificOutput: { hookEventName, additionalContext: haltContext(run.halt) },
      }
    }
    if (verdict.action === 'warn') {
      this.watcher.takeNudges(run)
      return {
        systemMessage: `${TAG} ${verdict.message}`,
        hookSpecificOutput: { hookEventName, additionalContext: nudgeText(verdict) },
      }
    }
    return {}
  }

  postToolUse(input, toolUseId) {
    return this.post(input, toolUseId, true, toText(input.tool_response), 'PostToolUse')
  }

  postToolUseFailure(input, toolUseId) {
    const error = input.error
    const text = typeof error === 'string' ? failureText(error) : toText(error)
    return this.post(input, toolUseId, false, text, 'PostToolUseFailure')
  }

  /** The end of a turn: its last answer closes the step. Never blocked. */
  stop(input) {
    const run = this.watcher.run(this.task)
    const text = input && input.last_assistant_message
    this.watcher.observe(run, typeof text === 'string' ? { type: 'assistant', text } : { type: 'alive' })
    return run.halt !== null ? { continue: false, stopReason: haltText(run.halt) } : {}
  }

  subagentStop(input) {
    const agent = input && input.agent_id
    if (typeof agent === 'string' && agent) this.watcher.close(agent)
    return {}
  }

  /** A new prompt in a halted session: Claude and you are told its calls will be denied. */
  userPromptSubmit() {
    const run = this.watcher.run(this.task)
    if (run.halt !== null) this.watcher.observe(run, { type: 'alive' }) // still halted, or reset since?
    const halt = run.halt
    if (halt === null) return {}
    return {
      systemMessage: haltText(halt),
      hookSpecificOutput: { hookEventName: 'UserPromptSubmit', additionalContext: skippedText(halt) },
    }
  }
}

/**
 * The `hooks` option of `query()` that feeds every tool call to `monitor`. `taskId`: the
 * session's task (default: the Monitor's current task; a subagent's calls count for its
 * `agent_id`); `timeout`: the matchers' timeout in seconds. Merge with hooks of your own by
 * concatenating the lists of each event.
 */
function hooks(monitor, options = {}) {
  checkMonitor(monitor, 'hooks')
  const { taskId, timeout } = options || {}
  const callbacks = new HookCallbacks(monitor, taskId)
  const matcher = (fn) => {
    const entry = { hooks: [async (input, toolUseId) => fn.call(callbacks, input || {}, toolUseId)] }
    if (timeout !== undefined && timeout !== null) entry.timeout = timeout
    return [entry]
  }
  return {
    PreToolUse: matcher(callbacks.preToolUse),
    PostToolUse: matcher(callbacks.postToolUse),
    PostToolUseFailure: matcher(callbacks.postToolUseFailure),
    Stop: matcher(callbacks.stop),
    SubagentStop: matcher(callbacks.subagentStop),
    UserPromptSubmit: matcher(callbacks.userPromptSubmit),
  }
}

const USAGE_KEYS = ['input_tokens', 'output_tokens', 'cache_creation_input_tokens', 'cache_read_input_tokens']
/** How many message ids the tracker remembers (one response's messages come together). */
const KEEP_IDS = 64

// The last running total (`total_cost_usd`) of each session, per Monitor. A result message gives
// what its whole session has cost so far, and a session (streaming input) carries many queries,
// each with a `trackSpend` (a tracker) of its own: what a query cost is the total past the last.
const SESSION_TOTALS = new WeakMap()
const KEEP_SESSIONS = 1024 // per Monitor

/**
 * Feeds the SDK's messages into `monitor`'s spend (`observe(message)` each one): an assistant
 * message's `usage` once per message id (a response with several content blocks comes as several
 * messages repeating it; a larger later figure counts the difference), priced by the Monitor's
 * table; the result message's `total_cost_usd` is the session's running total, so a query cost
 * what it adds to the session's last total (remembered per Monitor and session id), and the part
 * of that the table did not count is added as `costCents`. `halt` is the halt verdict once spend halted the task: the
 * next tool call is then denied by `hooks`, which stops the session.
 */
class SpendTracker {
  constructor(monitor, options = {}) {
    checkMonitor(monitor, 'SpendTracker')
    this._watcher = new Watcher(monitor)
    this._run = this._watcher.run((options && options.taskId) || '')
    this._seen = new Map()
    // the task's spend when the current query's first message came (null between queries)
    this._base = null
  }

  get monitor() {
    return this._watcher.monitor
  }

  get halt() {
    return this._run.halt
  }

  _spent() {
    const status = this.monitor.status()
    const task = this._run.task || (status.stack.length > 0 ? status.stack[status.stack.length - 1] : 'session')
    const entry = status.tasks.find((t) => t.taskId === task)
    return entry ? entry.spendCents : 0
  }

  /** Feeds one message; the verdict of the spend it added (null if it added none). */
  observe(message) {
    if (!message || typeof message !== 'object') return null
    if (message.type === 'assistant') return this._assistant(message)
    if (message.type === 'result') return this._result(message)
    return null
  }

  _observe(event) {
    const verdict = this._watcher.observe(this._run, event)
    this._run.nudges = [] // a spend warning is not passed to Claude (the listeners see it)
    return verdict
  }

  _assistant(message) {
    const body = message.message || {}
    const usage = body.usage
    if (!usage || typeof usage !== 'object') return null
    const figures = {}
    for (const key of USAGE_KEYS) figures[key] = Math.max(0, Math.floor(Number(usage[key]) || 0))
    const key = body.id || message.uuid || null
    const before = key !== null ? this._seen.get(key) : undefined
    let delta = figures
    if (before !== undefined) {
      delta = {}
      const merged = {}
      for (const k of USAGE_KEYS) {
        delta[k] = Math.max(0, figures[k] - before[k])
        merged[k] = Math.max(figures[k], before[k])
      }
      this._seen.set(key, merged)
    } else if (key !== null) {
      this._seen.set(key, figures)
      while (this._seen.size > KEEP_IDS) this._seen.delete(this._seen.keys().next().value)
    }
    const event = usageEvent(
      delta.input_tokens,
      delta.output_tokens,
      delta.cache_read_input_tokens,
      delta.cache_creation_input_tokens,
      typeof body.model === 'string' ? body.model : null,
    )
    if (event === null) return null
    if (this._base === null) this._base = this._spent()
    return this._observe(event)
  }

  _result(message) {
    const base = this._base
    this._base = null
    const total = message.total_cost_usd
    if (typeof total !== 'number' || !(total > 0)) return null
    let totals = SESSION_TOTALS.get(this.monitor)
    if (totals === undefined) SESSION_TOTALS.set(this.monitor, (totals = new Map()))
    const session = String(message.session_id)
    const before = totals.get(session) || 0
    totals.delete(session)
    totals.set(session, total)
    while (totals.size > KEEP_SESSIONS) totals.delete(totals.keys().next().value)
    // a total below the last one: the session's totals were reset since (`/clear`)
    const cost = total >= before ? total - before : total
    const counted = base !== null ? this._spent() - base : 0
    const extra = cost * 100 - counted
    if (!(extra > 0)) return null
    return this._observe({ type: 'usage', costCents: extra })
  }
}

/**
 * Yields `messages` (a `query()`) unchanged, feeding each into `monitor`'s spend
 * (`SpendTracker`). `interrupt` (`() => q.interrupt()`) is awaited once when spend halts the
 * task, to stop the session at once rather than at its next tool call.
 */
async function* trackSpend(monitor, messages, options = {}) {
  const tracker = new SpendTracker(monitor, options)
  const interrupt = options && options.interrupt
  let interrupted = false
  for await (const message of messages) {
    const verdict = tracker.observe(message)
    if (verdict !== null && verdict.action === 'halt' && typeof interrupt === 'function' && !interrupted) {
      interrupted = true
      await interrupt()
    }
    yield message
  }
}

module.exports = { SpendTracker, failureText, hooks, trackSpend }
