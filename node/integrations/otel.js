'use strict'
// agentbreaker/otel: OpenTelemetry metrics and span events for a Monitor or any breaker, through
// `@opentelemetry/api` (docs/observability.md; the Python twin is agentbreaker.integrations.otel).
//
//   const { instrument } = require('agentbreaker/otel')
//   const monitor = new Monitor()
//   instrument(monitor)                      // the global meter provider, or { meterProvider }
//
// The instruments are the core's vocabulary (`metricDefinitions()`), with its names, units,
// descriptions and buckets: counters `agentbreaker.halts` and `agentbreaker.warnings` (attribute
// `reason`: the rule's slug, `warning` for a breaker's own warning), `agentbreaker.state_changes`
// (`breaker`, `from`, `to`), `agentbreaker.tool_calls` and `agentbreaker.spend` (cents), and the
// histogram `agentbreaker.task.steps` (`outcome`: halted, done, error or ended). `task: true` adds
// the `task` attribute (one series per task: at most 1000 task values, later ones as `_other`).
// Every warning and halt is also an event on the active span (`agentbreaker.warning`,
// `agentbreaker.halt`, with `agentbreaker.reason`, `.task`, `.step`, `.message`, `.nudge`), a
// breaker's state change an `agentbreaker.state_change` event.
//
// What is counted is the core's own updates, as in Python: a Monitor hands them to its one
// recorder (`monitor.setMetricsRecorder`: a later instrument() on the same Monitor replaces the
// earlier one), a breaker's listener events go through the core's `metricUpdates()`. An
// instrument that throws never reaches the agent: it is counted (`errors`) and reported once
// (process warning `AGENTBREAKER_OTEL`).

const { loadFramework, invalidArgument } = require('./_common.js')
const native = require('../agentbreaker.js')

const api = loadFramework('otel', '@opentelemetry/api', 'the OpenTelemetry API')
const { version } = require('../package.json')

/** The instrumentation scope (meter name). */
const SCOPE = 'agentbreaker'
const SPAN_EVENT_WARNING = 'agentbreaker.warning'
const SPAN_EVENT_HALT = 'agentbreaker.halt'
const SPAN_EVENT_STATE_CHANGE = 'agentbreaker.state_change'
/** The most task values one instrumentation reports (`task: true`); later tasks count as `_other`. */
const MAX_TASKS = 1000
const OTHER_TASK = '_other'

/** The vocabulary (docs/observability.md), as the core defines it (`metricDefinitions()`). */
const VOCABULARY = Object.freeze(
  native.metricDefinitions().map((d) =>
    Object.freeze({
      name: d.name,
      instrument: d.instrument,
      unit: d.unit,
      description: d.description,
      ...(d.buckets ? { buckets: Object.freeze([...d.buckets]) } : {}),
    }),
  ),
)

const KINDS = [
  ['Monitor', 'monitor'],
  ['FailureBreaker', 'failure'],
  ['StagnationBreaker', 'stagnation'],
  ['BudgetBreaker', 'budget'],
  ['Loop', 'loop'],
  ['ExitStrategy', 'strategy'],
]

// Instruments per meter provider: making the same instrument twice on one meter makes the SDK warn.
const instrumentCache = new WeakMap()

function instruments(provider) {
  let table = instrumentCache.get(provider)
  if (table !== undefined) return table
  const meter = provider.getMeter(SCOPE, version)
  table = {}
  for (const d of VOCABULARY) {
    if (d.instrument === 'counter') {
      const counter = meter.createCounter(d.name, { unit: d.unit, description: d.description })
      table[d.name] = (value, attributes) => counter.add(value, attributes)
    } else {
      const options = { unit: d.unit, description: d.description }
      if (d.buckets) options.advice = { explicitBucketBoundaries: [...d.buckets] }
      const histogram = meter.createHistogram(d.name, options)
      table[d.name] = (value, attributes) => histogram.record(value, attributes)
    }
  }
  instrumentCache.set(provider, table)
  return table
}

/**
 * What an instrumentation's recorder and listeners share. It never refers to the instrumented
 * object: the Monitor holds its recorder strongly, and a recorder that referred back to the
 * Monitor would keep it alive.
 */
class Sink {
  constructor(meterProvider, task) {
    /** The provider given, or null: the global one, looked up at each record. */
    this.meterProvider = meterProvider || null
    this.task = task
    this.tasks = new Set()
    this.provider = null
    this.table = null
    this.errors = 0
  }

  /**
   * The instruments of the provider in effect now. Without a `meterProvider` that is the global
   * one at the time of the record (`@opentelemetry/api` has no proxy meter provider for metrics):
   * a Monitor instrumented before the application sets its provider records into it once it does.
   */
  current() {
    const provider = this.meterProvider || api.metrics.getMeterProvider()
    if (provider !== this.provider) {
      this.table = instruments(provider)
      this.provider = provider
    }
    return this.table
  }

  /** `[[name, value, attributes], ...]`, the core's updates, into the instruments. */
  record(updates) {
    let table
    try {
      table = this.current()
    } catch (error) {
      this.failed(error)
      return
    }
    for (const [name, value, attributes] of updates) {
      const add = table[name]
      if (add === undefined) continue
      try {
        add(value, this.task ? this.capTask(attributes) : attributes)
      } catch (error) {
        this.failed(error)
      }
    }
  }

  capTask(attributes) {
    const id = attributes.task
    if (typeof id !== 'string' || this.tasks.has(id)) return attributes
    if (this.tasks.size < MAX_TASKS) {
      this.tasks.add(id)
      return attributes
    }
    return { ...attributes, task: OTHER_TASK }
  }

  spanEvent(name, pairs) {
    try {
      const span = api.trace.getActiveSpan()
      if (span && span.isRecording()) span.addEvent(name, spanAttributes(pairs))
    } catch (error) {
      this.failed(error)
    }
  }

  /** Counted; the first one is a process warning. The agent goes on. */
  failed(error) {
    this.errors += 1
    if (this.errors === 1) {
      const message = error && typeof error.message === 'string' ? error.message : String(error)
      process.emitWarning(`agentbreaker: an OpenTelemetry instrument failed (${message}); the agent goes on`, {
        type: 'AgentBreakerWarning',
        code: 'AGENTBREAKER_OTEL',
      })
    }
  }
}

/** OpenTelemetry attributes cannot be null: the missing ones are left out. */
function spanAttributes(pairs) {
  const attributes = {}
  for (const [key, value] of Object.entries(pairs)) {
    if (value !== null && value !== undefined) attributes[`agentbreaker.${key}`] = value
  }
  return attributes
}

// The live instrumentation of each Monitor (it has one recorder).
const monitors = new WeakMap()

class Instrumentation {
  constructor(target, breaker, sink, undo) {
    this.target = target
    /** The `breaker` attribute of state changes (the kind of object, unless you named it). */
    this.breaker = breaker
    Object.defineProperty(this, '_sink', { value: sink })
    Object.defineProperty(this, '_undo', { value: undo, writable: true })
  }

  /** False once uninstrumented, or replaced by a later instrument() of the same Monitor. */
  get active() {
    return this._undo !== null
  }

  /** Records and span events that threw (contained: the agent never sees them). */
  get errors() {
    return this._sink.errors
  }

  /** Stops the metrics and span events of this instrumentation (idempotent). */
  uninstrument() {
    if (this._undo === null) return
    const undo = this._undo
    this._undo = null
    undo()
  }
}

/**
 * Reports `target`'s metrics to OpenTelemetry and its warnings and halts as span events (see the
 * file's head). `target`: a Monitor or a breaker (FailureBreaker, StagnationBreaker, BudgetBreaker,
 * Loop, ExitStrategy). Options: `meterProvider` (default: the global one, looked up at each record,
 * so one set later is used from then on), `task` (add the `task` attribute), `spanEvents` (default
 * true), `breaker` (the `breaker` attribute; default: the kind).
 */
function instrument(target, options = {}) {
  const { meterProvider, task = false, spanEvents = true, breaker } = options || {}
  const kind = KINDS.find(([cls]) => typeof native[cls] === 'function' && target instanceof native[cls])
  if (kind === undefined) {
    throw invalidArgument('instrument() takes a Monitor or a breaker (FailureBreaker, StagnationBreaker, BudgetBreaker, Loop, ExitStrategy)')
  }
  const name = typeof breaker === 'string' && breaker ? breaker : kind[1]
  const sink = new Sink(meterProvider, Boolean(task))
  if (kind[0] === 'Monitor') return instrumentMonitor(target, name, sink, spanEvents)

  const metricOptions = { task: sink.task }
  const listeners = {
    stateChange: (event) => {
      sink.record(native.metricUpdates(event, name, metricOptions))
      if (spanEvents) sink.spanEvent(SPAN_EVENT_STATE_CHANGE, { breaker: name, from: event.from, to: event.to, message: event.reason })
    },
    warning: (event) => {
      sink.record(native.metricUpdates(event, name, metricOptions))
      if (spanEvents) sink.spanEvent(SPAN_EVENT_WARNING, { reason: 'warning', message: event.message, breaker: name })
    },
    halt: (event) => {
      sink.record(native.metricUpdates(event, name, metricOptions))
      const halt = event.halt || {}
      if (spanEvents && typeof halt.slug === 'string') {
        sink.spanEvent(SPAN_EVENT_HALT, { reason: halt.slug, task: halt.taskId, message: halt.message, breaker: name })
      }
    },
  }
  const added = []
  for (const [type, listener] of Object.entries(listeners)) {
    try {
      target.on(type, listener)
      added.push([type, listener])
    } catch (error) {
      if (!error || error.code !== 'INVALID_ARGUMENT') throw error // an event this kind never emits
    }
  }
  return new Instrumentation(target, name, sink, () => {
    for (const [type, listener] of added) target.off(type, listener)
  })
}

function instrumentMonitor(monitor, name, sink, spanEvents) {
  const previous = monitors.get(monitor)
  if (previous !== undefined) previous._replaced()

  const onVerdict = (v) =>
    sink.spanEvent(v.action === 'halt' ? SPAN_EVENT_HALT : SPAN_EVENT_WARNING, {
      reason: v.reason,
      task: v.taskId,
      step: v.step,
      message: v.message,
      nudge: v.nudge,
    })
  monitor.setMetricsRecorder((updates) => sink.record(updates), { task: sink.task })
  if (spanEvents) monitor.on('verdict', onVerdict)

  const detach = () => {
    if (spanEvents) monitor.off('verdict', onVerdict)
  }
  const instrumentation = new Instrumentation(monitor, name, sink, () => {
    detach()
    if (monitors.get(monitor) === instrumentation) {
      monitors.delete(monitor)
      monitor.setMetricsRecorder(null)
    }
  })
  // A later instrument() of this Monitor: its recorder replaces this one's, and this one's span
  // events stop; uninstrument() of this one then leaves the later one alone.
  Object.defineProperty(instrumentation, '_replaced', {
    value: () => {
      if (instrumentation._undo === null) return
      instrumentation._undo = null
      detach()
    },
  })
  /**
   * Observes the tasks still open as ended (`agentbreaker.task.steps{outcome="ended"}`): call it
   * when the run or the process ends. Nothing once this instrumentation is no longer active.
   */
  instrumentation.endTasks = () => {
    if (!instrumentation.active) return
    const updates = []
    for (const t of monitor.status().tasks) {
      if (!t.halted) updates.push(['agentbreaker.task.steps', t.steps, { outcome: 'ended' }])
    }
    sink.record(updates)
  }
  monitors.set(monitor, instrumentation)
  return instrumentation
}

module.exports = {
  Instrumentation,
  SCOPE,
  SPAN_EVENT_HALT,
  SPAN_EVENT_STATE_CHANGE,
  SPAN_EVENT_WARNING,
  VOCABULARY,
  instrument,
}
