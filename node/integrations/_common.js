'use strict'
// What every framework adapter shares: the monitor, the per-run bookkeeping, the texts. Nothing
// here imports a framework. The texts are the Python adapters' (python/agentbreaker/integrations/
// _common.py), word for word, so a user sees the same lines whichever language runs the agent.

const { randomBytes } = require('node:crypto')
const { AgentHaltedError, Monitor } = require('../agentbreaker.js')

/** Every text the adapters put in front of the model or the user starts with this tag. */
const TAG = '[agentbreaker]'

// A tool result longer than twice this is sent to the Monitor as its head and its tail: the
// Monitor compares at most the first and last 4 KB of a result, so nothing it reads is lost.
const CLIP = 32 * 1024

/**
 * The most runs an adapter keeps open. A run that ends in a way the adapter never sees (an
 * exception out of the framework, an abort) is not closed by it; past this many, the oldest open
 * run is closed, so the Monitor's task table (4096 tasks) never fills up however many runs fail.
 */
const MAX_OPEN_RUNS = 1024

/** The keys of a Monitor's configuration an adapter's options may carry. */
const MONITOR_KEYS = ['profile', 'failure', 'stagnation', 'budget', 'toolLimits', 'warnBefore', 'budgetWarnPercent', 'clock']

function invalidArgument(message) {
  const error = new TypeError(message)
  error.code = 'INVALID_ARGUMENT'
  return error
}

/**
 * Checks that `pkg` can be found from this package (or from the application: a framework
 * installed beside a linked agentbreaker); throws an Error that names what to install. Only
 * resolves: an adapter that needs nothing of the framework at run time does not load it.
 */
function needFramework(subpath, pkg, framework) {
  const tried = []
  for (const from of [__dirname, process.cwd()]) {
    try {
      return require.resolve(pkg, { paths: [from] })
    } catch (error) {
      tried.push(error)
    }
  }
  const error = new Error(
    `agentbreaker/${subpath} needs ${framework}: npm install ${pkg} (${tried[0] && tried[0].message.split('\n')[0]})`,
  )
  error.code = 'MODULE_NOT_FOUND'
  error.cause = tried[0]
  throw error
}

/** `require(pkg)` of a framework the adapter needs at run time, found as `needFramework` finds it. */
function loadFramework(subpath, pkg, framework) {
  return require(needFramework(subpath, pkg, framework))
}

/** The monitor an adapter uses: `options.monitor`, or a new one from the Monitor keys of `options`. */
function makeMonitor(options) {
  const config = {}
  let any = false
  for (const key of MONITOR_KEYS) {
    if (options[key] !== undefined) {
      config[key] = options[key]
      any = true
    }
  }
  if (options.monitor === undefined || options.monitor === null) {
    return new Monitor(config)
  }
  if (any) {
    throw invalidArgument(
      `pass either monitor or the Monitor's settings (${Object.keys(config).sort().join(', ')}), not both`,
    )
  }
  if (!(options.monitor instanceof Monitor)) {
    throw invalidArgument('monitor must be an agentbreaker Monitor')
  }
  return options.monitor
}

/** A task id for one run (the Monitor keeps counters per task). */
function newTaskId(prefix) {
  return `${prefix}-${randomBytes(8).toString('hex')}`
}

function clip(text) {
  return text.length <= 2 * CLIP ? text : `${text.slice(0, CLIP)}\n…\n${text.slice(-CLIP)}`
}

/** JSON with the keys of every object sorted, so the same value always gives the same text. */
function stableJson(value) {
  return JSON.stringify(value, (key, v) => {
    if (v === null || typeof v !== 'object' || Array.isArray(v)) {
      return typeof v === 'bigint' ? v.toString() : v
    }
    const sorted = {}
    for (const k of Object.keys(v).sort()) sorted[k] = v[k]
    return sorted
  })
}

/**
 * A tool's output as the text the Monitor compares: strings as they are, bytes as UTF-8,
 * JSON-like values as JSON with sorted keys, anything else by `String`. Never throws.
 */
function toText(value) {
  if (typeof value === 'string') return clip(value)
  if (value === null || value === undefined) return ''
  try {
    if (value instanceof Uint8Array) return clip(Buffer.from(value).toString('utf8'))
    if (typeof value === 'object') {
      const json = stableJson(value)
      if (json !== undefined) return clip(json)
    }
    return clip(String(value))
  } catch {
    return `<${(value && value.constructor && value.constructor.name) || typeof value}>`
  }
}

/** Containers deeper than this are copied as text by `jsonSafe` (the Monitor takes 127). */
const SAFE_DEPTH = 64

/**
 * `value` as the JSON values the Monitor takes, for an event it refused (a tool input a schema
 * transformed into a BigInt, a cyclic object, ...): a BigInt as its decimal text, a number that
 * is not finite, a function or a symbol as text, an object met again inside itself as
 * `<cycle>`, a Map as an object (keys as text), a Set as an array, an object with `toJSON` (a
 * Date) as what that returns, containers past 64 levels as text. Never throws.
 */
function jsonSafe(value, depth = 0, path = new Set()) {
  try {
    switch (typeof value) {
      case 'string':
      case 'boolean':
        return value
      case 'number':
        return Number.isFinite(value) ? value : String(value)
      case 'bigint':
        return value.toString()
      case 'undefined':
        return null
      case 'symbol':
        return value.toString()
      case 'function':
        return `<function ${value.name || 'anonymous'}>`
      default:
        break
    }
    if (value === null) return null
    if (path.has(value)) return '<cycle>'
    if (depth >= SAFE_DEPTH) return toText(value)
    path.add(value)
    try {
      if (Array.isArray(value) || value instanceof Set) {
        return Array.from(value, (item) => jsonSafe(item, depth + 1, path))
      }
      if (value instanceof Map) {
        const out = {}
        for (const [key, item] of value) out[typeof key === 'string' ? key : toText(jsonSafe(key, depth + 1, path))] = jsonSafe(item, depth + 1, path)
        return out
      }
      if (ArrayBuffer.isView(value) || value instanceof Error) return value instanceof Error ? errorText(value) : toText(value)
      if (typeof value.toJSON === 'function') {
        const json = value.toJSON()
        if (json !== value) return jsonSafe(json, depth + 1, path)
      }
      const out = {}
      for (const key of Object.keys(value)) {
        const item = value[key]
        if (item !== undefined) out[key] = jsonSafe(item, depth + 1, path)
      }
      return out
    } finally {
      path.delete(value)
    }
  } catch {
    return '<unreadable>'
  }
}

/** A failed call's text: an Error's name and message, anything else as text. */
function errorText(error) {
  if (error instanceof Error || (error && typeof error === 'object' && typeof error.message === 'string')) {
    const name = typeof error.name === 'string' && error.name ? error.name : 'Error'
    return error.message ? `${name}: ${error.message}` : name
  }
  return toText(error) || 'error'
}

/** A whole number of tokens (bad or missing figures are 0). */
function count(value) {
  return typeof value === 'number' && Number.isFinite(value) && value > 0 ? Math.floor(value) : 0
}

/**
 * A `usage` event (null when it counts nothing). `input` excludes the cache reads and writes, as
 * the Monitor counts them (Anthropic's convention). Counts of zero are left out.
 */
function usageEvent(input, output, cacheRead = 0, cacheWrite = 0, model = null) {
  const usage = {}
  if (count(input) > 0) usage.input_tokens = count(input)
  if (count(output) > 0) usage.output_tokens = count(output)
  if (count(cacheRead) > 0) usage.cache_read_input_tokens = count(cacheRead)
  if (count(cacheWrite) > 0) usage.cache_creation_input_tokens = count(cacheWrite)
  if (Object.keys(usage).length === 0) return null
  const event = { type: 'usage', usage }
  if (typeof model === 'string' && model) event.model = model
  return event
}

/** What the model is told on a warning (the verdict's nudge). */
function nudgeText(verdict) {
  return `${TAG} ${verdict.nudge || verdict.message}`
}

/** What the user is told when the run is halted. */
function haltText(verdict) {
  return `${TAG} Run halted (${verdict.reason}): ${verdict.message}`
}

/** What the model is told when the run is halted after a call it made (with the nudge). */
function haltContext(verdict) {
  return verdict.nudge ? `${haltText(verdict)}\n${verdict.nudge}` : haltText(verdict)
}

/** The result of a call that was not run because its task is halted (what the model reads). */
function skippedText(verdict) {
  const text = `${TAG} Not run: the run is halted (${verdict.reason}): ${verdict.message}`
  return verdict.nudge ? `${text}\n${verdict.nudge}` : text
}

/** One run's bookkeeping: its task, its halt, the nudges waiting for the model. */
class Run {
  constructor(task) {
    this.task = task
    /** The halt verdict, once the Monitor halted the run's task. */
    this.halt = null
    /** The run's last warn or halt verdict (null while it is healthy). */
    this.latest = null
    /** Nudges of warnings not yet passed to the model. */
    this.nudges = []
    /** `latest` changed since the framework last saw it. */
    this.dirty = false
  }
}

/** A monitor and the runs it watches: the part of every adapter that talks to the Monitor. */
class Watcher {
  constructor(monitor) {
    this.monitor = monitor
    /** The latest warn or halt verdict of any run. */
    this.lastVerdict = null
    /** The latest halt verdict of any run. */
    this.lastHalt = null
    this.runs = new Map() // in the order they opened
    /** Events the Monitor refused even as their JSON-safe copy (or failed on): not watched. */
    this.observeErrors = 0
  }

  run(task) {
    let run = this.runs.get(task)
    if (run === undefined) {
      run = new Run(task)
      this.runs.set(task, run)
      while (this.runs.size > MAX_OPEN_RUNS) {
        this.close(this.runs.keys().next().value)
      }
    }
    return run
  }

  /**
   * Feeds one event of `run` to the monitor (a run whose task is '' counts for the Monitor's
   * current task). Never throws: an event the Monitor refuses (INVALID_EVENT: a tool input
   * holding a BigInt, a cycle, a function, nesting past its limit) is given again as its
   * `jsonSafe` copy; if that fails too (or the Monitor failed), the event is counted in
   * `observeErrors` (a warning the first time) and answered with a `continue` verdict: an
   * adapter never stops or breaks a run by a fault of its own.
   */
  observe(run, event) {
    if (run.task) event.taskId = run.task
    let verdict
    try {
      verdict = this.monitor.observe(event)
    } catch (error) {
      verdict = this.observeAgain(event, error)
      if (verdict === null) return continueVerdict(event)
    }
    // a halted task answers every later event with its halt until the Monitor is reset: any
    // other answer for a run still open means it was, and the run goes on (a run the adapter
    // closed keeps its halt: its late events reach a new task)
    if (run.halt !== null && verdict.action !== 'halt' && this.runs.get(run.task) === run) run.halt = null
    if (verdict.action !== 'continue') this.note(run, verdict)
    return verdict
  }

  /** The verdict of the event's JSON-safe copy, or null (counted, warned once) when that fails too. */
  observeAgain(event, error) {
    // INVALID_EVENT, or an error of the event itself (a getter that throws): try the copy
    if (error && (error.code === 'INVALID_EVENT' || typeof error.code !== 'string')) {
      try {
        return this.monitor.observe(jsonSafe(event))
      } catch (again) {
        error = again
      }
    }
    this.observeErrors += 1
    if (this.observeErrors === 1) {
      const code = (error && typeof error.code === 'string' && error.code) || 'ERROR'
      const message = error && typeof error.message === 'string' ? error.message : toText(error)
      process.emitWarning(`agentbreaker: an event was not watched (${code}: ${message})`, {
        type: 'AgentBreakerWarning',
        code: 'AGENTBREAKER_OBSERVE',
      })
    }
    return null
  }

  note(run, verdict) {
    this.lastVerdict = verdict
    run.latest = verdict
    run.dirty = true
    if (verdict.action === 'halt') {
      run.halt = verdict
      this.lastHalt = verdict
    } else if (verdict.nudge || verdict.message) {
      run.nudges.push(nudgeText(verdict))
    }
  }

  takeNudges(run) {
    if (run.nudges.length === 0) return run.nudges
    const nudges = run.nudges
    run.nudges = []
    return nudges
  }

  /** The run is over: the Monitor forgets its task; the run (and its halt) is returned. */
  close(task) {
    const run = this.runs.get(task)
    if (run === undefined) return undefined
    this.runs.delete(task)
    if (task) this.monitor.observe({ type: 'heartbeat', taskId: task, phase: 'done' })
    return run
  }
}

/** The answer to an event that could not be watched: the run goes on. */
function continueVerdict(event) {
  const task = event && event.taskId
  return {
    action: 'continue',
    reason: null,
    message: null,
    nudge: null,
    taskId: typeof task === 'string' ? task : null,
    step: 0,
    detail: null,
  }
}

/** Calls `fn` (a user's callback) and awaits it when it returns a promise. */
async function callMaybe(fn, ...args) {
  return fn === undefined || fn === null ? undefined : await fn(...args)
}

module.exports = {
  AgentHaltedError,
  MAX_OPEN_RUNS,
  Monitor,
  Run,
  TAG,
  Watcher,
  callMaybe,
  errorText,
  haltContext,
  haltText,
  invalidArgument,
  jsonSafe,
  loadFramework,
  makeMonitor,
  needFramework,
  newTaskId,
  nudgeText,
  skippedText,
  stableJson,
  toText,
  usageEvent,
}
