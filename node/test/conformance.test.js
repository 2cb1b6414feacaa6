'use strict'
// The Node runner of the shared conformance suite (tests/conformance/README.md): one test() per
// scenario file, each op mapped onto the package's public JavaScript API.
//
// AGENTBREAKER_CONFORMANCE_DIR names the suite directory (default: the repository's
// tests/conformance).

const test = require('node:test')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')

const ab = require('..')

const SUITE_DIR = process.env.AGENTBREAKER_CONFORMANCE_DIR
  ? path.resolve(process.env.AGENTBREAKER_CONFORMANCE_DIR)
  : path.join(__dirname, '..', '..', 'tests', 'conformance')

const TOP_KEYS = new Set(['description', 'subject', 'config', 'configError', 'spec', 'steps'])
const STEP_KEYS = new Set(['op', 'at', 'args', 'repeat', 'expect', 'expectError'])

/** The event types each subject emits (the listener attached at construction hears them all). */
const EVENT_TYPES = {
  failure: ['stateChange', 'warning'],
  stagnation: ['stateChange'],
  budget: ['halt'],
  strategy: ['warning'],
  fixPlan: ['warning'],
  loop: ['stateChange', 'warning', 'halt'],
  analyzer: [],
  env: [],
  monitor: ['verdict'],
}

/** The placeholder of a restore step for the result of the latest snapshot step (README). */
const LAST_SNAPSHOT = '$last_snapshot'

function scenarioFiles(dir) {
  const out = []
  const entries = fs.readdirSync(dir, { withFileTypes: true }).map((e) => e.name).sort()
  for (const name of entries) {
    const full = path.join(dir, name)
    if (fs.statSync(full).isDirectory()) {
      out.push(...scenarioFiles(full))
    } else if (name.endsWith('.json') && name !== 'schema.json') {
      out.push(full)
    }
  }
  return out
}

/** A mistake in the scenario or the runner (as opposed to a behaviour mismatch). */
class RunnerError extends Error {}

function substituteTmp(value, tmp) {
  if (typeof value === 'string') {
    return value.startsWith('$TMP/') ? path.join(tmp, value.slice('$TMP/'.length)) : value
  }
  if (Array.isArray(value)) {
    return value.map((v) => substituteTmp(v, tmp))
  }
  if (value !== null && typeof value === 'object') {
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, substituteTmp(v, tmp)]))
  }
  return value
}

function show(value) {
  return JSON.stringify(value)
}

/** `expect` semantics: every key given must match, recursively; arrays elementwise with equal
 * length; numbers within 1e-9; null matches null or absent. */
function partialMatch(expected, actual, where) {
  const mismatch = () => {
    throw new Error(`at ${where}: expected ${show(expected)}, got ${show(actual)}`)
  }
  if (expected === null) {
    if (actual !== null && actual !== undefined) mismatch()
    return
  }
  if (Array.isArray(expected)) {
    if (!Array.isArray(actual)) mismatch()
    if (expected.length !== actual.length) {
      throw new Error(`at ${where}: expected ${expected.length} elements, got ${actual.length}: ${show(actual)}`)
    }
    expected.forEach((e, i) => partialMatch(e, actual[i], `${where}[${i}]`))
    return
  }
  if (typeof expected === 'object') {
    if (actual === null || typeof actual !== 'object' || Array.isArray(actual)) mismatch()
    for (const [key, value] of Object.entries(expected)) {
      partialMatch(value, actual[key], `${where}.${key}`)
    }
    return
  }
  if (typeof expected === 'number') {
    if (typeof actual !== 'number' || !(Math.abs(expected - actual) <= 1e-9)) mismatch()
    return
  }
  if (expected !== actual) mismatch()
}

function only(args, allowed) {
  for (const key of Object.keys(args)) {
    if (!allowed.includes(key)) throw new RunnerError(`unknown arg ${show(key)}`)
  }
}

function build(subject, config, clock, events) {
  const record = (event) => events.push(event)
  let object
  switch (subject) {
    case 'failure':
      object = new ab.FailureBreaker(config, clock)
      break
    case 'stagnation':
      object = new ab.StagnationBreaker(config, clock)
      break
    case 'budget':
      object = new ab.BudgetBreaker(config, clock)
      break
    case 'strategy':
      object = new ab.ExitStrategy(config, clock)
      break
    case 'fixPlan':
      object = new ab.FixPlan(config, clock)
      break
    case 'loop':
      object = new ab.Loop(config, clock)
      break
    case 'monitor':
      // The clock inside the options object, as `new Monitor({profile, ..., clock})` is written.
      object = config !== null && typeof config === 'object' && !Array.isArray(config)
        ? new ab.Monitor({ ...config, clock })
        : new ab.Monitor(config, clock)
      break
    case 'analyzer':
    case 'env':
      if (config !== undefined && !(config !== null && typeof config === 'object' && Object.keys(config).length === 0)) {
        throw new RunnerError(`${subject} takes no config`)
      }
      return null
    default:
      throw new RunnerError(`unknown subject ${show(subject)}`)
  }
  for (const type of EVENT_TYPES[subject]) {
    object.on(type, record)
  }
  return object
}

/** Runs one op through the public API; returns its result as plain data (null for void).
 * `scenario` holds the listener's events and the result of the latest snapshot step. */
async function runOp(subject, object, op, args, scenario) {
  const unknown = () => {
    throw new RunnerError(`unknown op ${show(op)} for ${subject}`)
  }
  if (op === 'events') {
    only(args, [])
    return { events: scenario.events.splice(0) }
  }
  if (op === 'snapshot' && typeof object?.snapshot === 'function' && subject !== 'budget') {
    only(args, [])
    scenario.lastSnapshot = object.snapshot()
    return scenario.lastSnapshot
  }
  if (op === 'restore' && typeof object?.restore === 'function') {
    only(args, ['snapshot'])
    if (args.snapshot !== LAST_SNAPSHOT) return object.restore(args.snapshot)
    if (scenario.lastSnapshot === undefined) throw new RunnerError(`${LAST_SNAPSHOT} before any snapshot step`)
    // Through JSON text, as a hook that keeps its snapshot in a file between processes.
    return object.restore(JSON.parse(JSON.stringify(scenario.lastSnapshot)))
  }
  switch (subject) {
    case 'failure':
      switch (op) {
        case 'recordSuccess':
          only(args, [])
          return object.recordSuccess()
        case 'recordFailure':
          only(args, ['error'])
          return object.recordFailure(args.error)
        case 'shouldAllowOperation':
          only(args, [])
          return object.shouldAllowOperation()
        case 'getStatus':
          only(args, [])
          return object.getStatus()
        case 'metrics':
          only(args, [])
          return object.metrics()
        case 'reset':
          only(args, [])
          return object.reset()
        case 'save':
          only(args, ['path'])
          return object.save(args.path)
        case 'load':
          only(args, ['path'])
          return { loaded: object.load(args.path) }
        case 'call': {
          only(args, ['error'])
          let ran = false
          const thrown = 'error' in args ? new Error(args.error) : null
          try {
            await object.call(async (x) => {
              ran = true
              if (thrown !== null) throw thrown
              return x
            }, 'value')
            return { called: true, ok: true }
          } catch (error) {
            if (ran && error === thrown) return { called: true, ok: false }
            if (ran) throw new Error(`the guarded function ran, then the call failed with ${error}`)
            return Promise.reject(error)
          }
        }
        default:
          return unknown()
      }
    case 'stagnation':
      switch (op) {
        case 'recordProgress':
          return object.recordProgress(args)
        case 'recordStep':
          return object.recordStep(args)
        case 'recordError':
          only(args, ['error', 'transient'])
          return object.recordError(args.error, 'transient' in args ? { transient: args.transient } : undefined)
        case 'check':
          only(args, [])
          return object.check()
        case 'getStatus':
          only(args, [])
          return object.getStatus()
        case 'reset':
          only(args, [])
          return object.reset()
        default:
          return unknown()
      }
    case 'budget':
      switch (op) {
        case 'ingest':
          only(args, ['event'])
          return { halt: object.ingest(args.event) }
        case 'tick':
          only(args, [])
          return { halts: object.tick() }
        case 'snapshot':
          only(args, [])
          return object.snapshot()
        case 'reset':
          only(args, [])
          return object.reset()
        default:
          return unknown()
      }
    case 'analyzer':
      if (op !== 'analyze') return unknown()
      only(args, ['text'])
      return ab.analyze(args.text)
    case 'strategy':
    case 'fixPlan':
      switch (op) {
        case 'shouldExit': {
          only(args, ['text', 'circuitState'])
          const analysis = ab.analyze('text' in args ? args.text : '')
          return object.shouldExit(analysis, args.circuitState)
        }
        case 'getStatus':
          if (subject !== 'fixPlan') return unknown()
          only(args, [])
          return object.getStatus()
        case 'reset':
          only(args, [])
          return object.reset()
        default:
          return unknown()
      }
    case 'loop':
      switch (op) {
        case 'observe':
          return object.observe(args)
        case 'getStatus':
          only(args, [])
          return object.getStatus()
        case 'reset':
          only(args, [])
          return object.reset()
        default:
          return unknown()
      }
    case 'monitor':
      switch (op) {
        case 'observe':
          only(args, ['event'])
          return object.observe(args.event)
        case 'tick':
          only(args, [])
          return { verdicts: object.tick() }
        case 'status':
          only(args, [])
          return object.status()
        case 'reset':
          only(args, [])
          return object.reset()
        default:
          return unknown()
      }
    case 'env':
      if (op !== 'configFromEnv') return unknown()
      only(args, ['env'])
      if (args.env === null || typeof args.env !== 'object') {
        throw new RunnerError('configFromEnv needs an env object')
      }
      return ab.configFromEnv(args.env)
    default:
      throw new RunnerError(`unknown subject ${show(subject)}`)
  }
}

async function runScenario(file) {
  const scenario = JSON.parse(fs.readFileSync(file, 'utf8'))
  if (scenario === null || typeof scenario !== 'object' || Array.isArray(scenario)) {
    throw new RunnerError('a scenario must be an object')
  }
  for (const key of Object.keys(scenario)) {
    if (!TOP_KEYS.has(key)) throw new RunnerError(`unknown top-level key ${show(key)}`)
  }
  const { subject } = scenario
  if (!(subject in EVENT_TYPES)) throw new RunnerError(`unknown subject ${show(subject)}`)
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'agentbreaker-node-'))
  try {
    const config = substituteTmp(scenario.config, tmp)
    const clock = new ab.ManualClock(0)
    const state = { events: [], lastSnapshot: undefined }
    if ('configError' in scenario) {
      let built
      try {
        built = build(subject, config, clock, state.events)
      } catch (error) {
        if (error instanceof RunnerError) throw error
        if (error.code === scenario.configError) return
        throw new Error(`construction failed with ${error.code}: ${error.message}, expected ${scenario.configError}`)
      }
      throw new Error(`construction succeeded (${built}), expected ${scenario.configError}`)
    }
    const object = build(subject, config, clock, state.events)
    if (!Array.isArray(scenario.steps)) throw new RunnerError('steps must be a list')
    for (const [index, step] of scenario.steps.entries()) {
      try {
        await runStep(subject, object, step, clock, state, tmp)
      } catch (error) {
        error.message = `step ${index} (${show(step.op)}): ${error.message}`
        throw error
      }
    }
  } finally {
    fs.rmSync(tmp, { recursive: true, force: true })
  }
}

async function runStep(subject, object, step, clock, state, tmp) {
  for (const key of Object.keys(step)) {
    if (!STEP_KEYS.has(key)) throw new RunnerError(`unknown step key ${show(key)}`)
  }
  if (typeof step.op !== 'string') throw new RunnerError('missing op')
  const args = substituteTmp(step.args === undefined ? {} : step.args, tmp)
  if (args === null || typeof args !== 'object' || Array.isArray(args)) {
    throw new RunnerError('args must be an object')
  }
  const repeat = step.repeat === undefined ? 1 : step.repeat
  if (!Number.isInteger(repeat) || repeat < 0) throw new RunnerError('bad repeat')
  if ('at' in step) clock.set(step.at)
  let last = null
  for (let i = 0; i < repeat; i++) {
    let failure = null
    try {
      last = await runOp(subject, object, step.op, args, state)
    } catch (error) {
      if (error instanceof RunnerError || step.expectError === undefined) throw error
      failure = error
    }
    if (step.expectError !== undefined) {
      if (failure === null) throw new Error(`expected ${step.expectError}, got result ${show(last)}`)
      if (failure.code !== step.expectError) {
        throw new Error(`expected ${step.expectError}, got ${failure.code}: ${failure.message}`)
      }
    }
  }
  if (step.expectError === undefined && step.expect !== undefined) {
    partialMatch(step.expect, last === undefined ? null : last, '$')
  }
}

const files = scenarioFiles(SUITE_DIR)
if (files.length === 0) {
  throw new Error(`no scenarios under ${SUITE_DIR}`)
}
for (const file of files) {
  const name = path.relative(SUITE_DIR, file).replace(/\.json$/, '').split(path.sep).join('/')
  test(name, () => runScenario(file))
}
