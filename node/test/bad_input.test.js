'use strict'
// The bad-input matrix of the Node surface (issue 10b). One table below: a row per input of a
// public entry point (every constructor, method and function argument, every config, option,
// event, observation, analysis and snapshot field), a column per kind of bad value. Every cell is
// one test: the value goes in, the documented outcome must come out (a thrown error with its code,
// or a normal return), the process must not crash, the error must be an Error with a short
// message, and the object must still work afterwards (each row's health check, after every cell).
//
// docs/bad-input/node.md is generated from this table (`node test/bad_input.test.js --write-doc`)
// and a test fails when the committed file differs. `node test/bad_input.test.js --observed`
// prints what every cell does now, in the table's notation (for adding rows).

const test = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const path = require('node:path')

const ab = require('..')

const DOC = path.join(__dirname, '..', '..', 'docs', 'bad-input', 'node.md')

// The 10 MB string: agent-like lines (built once).
const TEN_MB = 'Error: connection refused at 10.0.0.1:5432 (attempt 3)\n'.repeat(
  Math.ceil((10 * 1024 * 1024) / 56),
).slice(0, 10 * 1024 * 1024)

/** The columns: the kind of bad value, and the value itself (`wrong type` is the row's own). */
const COLUMNS = [
  ['wrong type', (row) => row.wrong],
  ['null', () => null],
  ['undefined', () => undefined],
  ['NaN', () => NaN],
  ['+Infinity', () => Infinity],
  ['-Infinity', () => -Infinity],
  ['negative (-1)', () => -1],
  ['zero', () => 0],
  ['fraction (1.5)', () => 1.5],
  ['2^64', () => 2 ** 64],
  ['1e300', () => 1e300],
  ['10 MB string', () => TEN_MB],
]

/** The outcomes, as written in the table and in the document. */
const OUTCOMES = {
  ok: 'accepted',
  TA: 'TypeError INVALID_ARGUMENT',
  TC: 'TypeError INVALID_CONFIG',
  TE: 'TypeError INVALID_EVENT',
  TS: 'TypeError INVALID_SNAPSHOT',
  A: 'INVALID_ARGUMENT',
  C: 'INVALID_CONFIG',
  E: 'INVALID_EVENT',
  S: 'INVALID_SNAPSHOT',
  IO: 'IO',
}
const CODE_TOKENS = {
  INVALID_ARGUMENT: 'A',
  INVALID_CONFIG: 'C',
  INVALID_EVENT: 'E',
  INVALID_SNAPSHOT: 'S',
  IO: 'IO',
}
/**
 * Longest error message a cell may produce, in characters: a message must not repeat a 10 MB
 * input (the core cuts its messages at 1024 bytes plus `…`; the code prefix and the binding's
 * own wording come on top).
 */
const MAX_MESSAGE = 1100

/** An outcome token as the document writes it. */
function outcomeText(token) {
  return OUTCOMES[token]
}

// ---------------------------------------------------------------------------------------------
// Health checks: after every cell, the object of the row (and the module) still works.

function failureWorks(breaker) {
  breaker.reset()
  breaker.recordFailure('health check')
  assert.equal(breaker.getStatus().consecutiveFailures, 1)
  breaker.recordSuccess()
  assert.deepEqual(breaker.shouldAllowOperation(), { allowed: true, message: null })
  assert.equal(breaker.state, 'CLOSED')
}

function stagnationWorks(breaker) {
  breaker.reset()
  breaker.recordProgress({ filesChanged: 1, outputLength: 10 })
  breaker.recordError('health check')
  assert.deepEqual(Object.values(breaker.getStatus().errorCounts), [1])
  assert.equal(breaker.check().allowContinue, true)
}

function budgetWorks(breaker) {
  breaker.reset()
  assert.equal(breaker.ingest({ type: 'tool_use', name: 'bash' }), null)
  assert.equal(breaker.snapshot().tasks[0].toolCalls, 1)
  assert.deepEqual(breaker.tick(), [])
}

function strategyWorks(strategy) {
  strategy.reset()
  const decision = strategy.shouldExit(ab.analyze('still working on it'))
  assert.equal(typeof decision.exit, 'boolean')
}

function loopWorks(loop) {
  loop.reset()
  const decision = loop.observe({ output: 'still working on it', filesChanged: 1 })
  assert.equal(decision.action, 'continue')
  assert.equal(decision.iteration, 1)
}

function monitorWorks(monitor) {
  monitor.reset()
  assert.equal(monitor.observe({ type: 'tool_use', name: 'bash' }).action, 'continue')
  assert.equal(monitor.status().tasks[0].toolCalls, 1)
  assert.deepEqual(monitor.tick(), [])
}

function clockWorks(clock) {
  clock.set(5)
  clock.advance(5)
  assert.equal(clock.now(), 10)
}

function moduleWorks() {
  assert.equal(ab.analyze('All tests pass. The task is complete.\nEXIT_SIGNAL: true').exitSignal, true)
  assert.equal(ab.fingerprint('Error at line 12'), ab.fingerprint('Error at line 13'))
  failureWorks(new ab.FailureBreaker())
}

/** The health check of whatever a constructor made. */
function madeWorks(made) {
  if (made instanceof ab.FailureBreaker) failureWorks(made)
  else if (made instanceof ab.StagnationBreaker) stagnationWorks(made)
  else if (made instanceof ab.BudgetBreaker) budgetWorks(made)
  else if (made instanceof ab.ExitStrategy || made instanceof ab.FixPlan) strategyWorks(made)
  else if (made instanceof ab.Loop) loopWorks(made)
  else if (made instanceof ab.Monitor) monitorWorks(made)
  else if (made instanceof ab.ManualClock) clockWorks(made)
  else if (made instanceof ab.SystemClock) assert.equal(typeof made.now(), 'number')
  else assert.fail(`a constructor returned ${made}`)
}

// ---------------------------------------------------------------------------------------------
// The table. `expect` has one token per column, in COLUMNS order (see OUTCOMES).

// Expected outcomes, by entry point (in the order of the recipes below), with a note for the doc.
// Columns as COLUMNS: wrong type, null, undefined, NaN, +Infinity, -Infinity, -1, 0, 1.5, 2^64,
// 1e300, 10 MB string. Tokens as OUTCOMES.
const EXPECT = {
  'analyze(text)':                                             'TA TA TA TA TA TA TA TA TA TA TA ok',
  'fingerprint(error)':                                        'TA TA TA TA TA TA TA TA TA TA TA ok',
  'fingerprint(error, mode)':                                  ['TA ok ok TA TA TA TA TA TA TA TA A', 'null and undefined mean `normalized`; an unknown mode is INVALID_ARGUMENT'],
  'configFromEnv(env)':                                        ['A ok ok TA TA TA A A A A A A', 'null and undefined mean `process.env`'],
  'configFromEnv(env): a variable':                            ['A A ok TA TA TA A A A A A ok', 'an invalid value falls back to the default with a warning in the result'],
  'profile(name)':                                             ['TA TA TA TA TA TA TA TA TA TA TA ok', 'an unknown name returns null'],
  'profileNames() (extra argument)':                           'ok ok ok ok ok ok ok ok ok ok ok ok',
  'new ManualClock(startMs)':                                  ['TA ok ok TA TA TA A ok A A A TA', 'null and undefined mean 0'],
  'ManualClock#set(ms)':                                       'TA TA TA TA TA TA A ok A A A TA',
  'ManualClock#advance(ms)':                                   'TA TA TA TA TA TA A ok A A A TA',
  'ManualClock#now() (extra argument)':                        'ok ok ok ok ok ok ok ok ok ok ok ok',
  'new SystemClock() (extra argument)':                        'ok ok ok ok ok ok ok ok ok ok ok ok',
  'SystemClock#now() (extra argument)':                        'ok ok ok ok ok ok ok ok ok ok ok ok',
  'new FailureBreaker(config)':                                'C ok ok TC TC TC C C C C C C',
  'new FailureBreaker(config, clock): clock':                  'TA ok ok TA TA TA TA TA TA TA TA TA',
  'FailureConfig.failureThreshold':                            'C ok ok TC TC TC C C C C C C',
  'FailureConfig.warningThreshold':                            'C ok ok TC TC TC C ok C C C C',
  'FailureConfig.cooldownMs':                                  'C ok ok TC TC TC C ok C C C C',
  'FailureConfig.backoffMultiplier':                           ['C ok ok TC TC TC C C ok ok ok C', 'huge multipliers are accepted (the cooldown is capped by maxCooldownMs)'],
  'FailureConfig.maxCooldownMs':                               'C ok ok TC TC TC C C C C C C',
  'FailureConfig.identicalErrorThreshold':                     'C ok ok TC TC TC C ok C C C C',
  'FailureConfig.historyLimit':                                'C ok ok TC TC TC C ok C C C C',
  'FailureConfig.halfOpenMaxProbes':                           'C ok ok TC TC TC C C C C C C',
  'FailureConfig.probeTimeoutMs':                              'C ok ok TC TC TC C C C C C C',
  'FailureConfig.errorMatch':                                  'C ok ok TC TC TC C C C C C C',
  'FailureConfig.statePath':                                   ['C ok ok TC TC TC C C C C C IO', 'null means no state file'],
  'FailureBreaker#recordSuccess() (extra argument)':           'ok ok ok ok ok ok ok ok ok ok ok ok',
  'FailureBreaker#recordFailure(error)':                       ['TA TA TA TA TA TA TA TA TA TA TA ok', 'text longer than 4096 bytes is cut'],
  'FailureBreaker#shouldAllowOperation() (extra argument)':    'ok ok ok ok ok ok ok ok ok ok ok ok',
  'FailureBreaker#tryAcquire() (extra argument)':              'ok ok ok ok ok ok ok ok ok ok ok ok',
  'FailureBreaker#getStatus() (extra argument)':               'ok ok ok ok ok ok ok ok ok ok ok ok',
  'FailureBreaker#metrics() (extra argument)':                 'ok ok ok ok ok ok ok ok ok ok ok ok',
  'FailureBreaker#reset() (extra argument)':                   'ok ok ok ok ok ok ok ok ok ok ok ok',
  'FailureBreaker#snapshot() (extra argument)':                'ok ok ok ok ok ok ok ok ok ok ok ok',
  'FailureBreaker#restore(snapshot)':                          'S S S TS TS TS S S S S S S',
  'FailureSnapshot.version':                                   'S S S TS TS TS S S S S S S',
  'FailureSnapshot.kind':                                      'S S S TS TS TS S S S S S S',
  'FailureSnapshot.state':                                     'S S S TS TS TS S S S S S S',
  'FailureSnapshot.consecutiveFailures':                       'S S S TS TS TS S ok S S S S',
  'FailureSnapshot.openedAt':                                  'S ok ok TS TS TS S ok S S S S',
  'FailureSnapshot.backoffLevel':                              'S S S TS TS TS S ok S S S S',
  'FailureSnapshot.trips':                                     'S S S TS TS TS S ok S S S S',
  'FailureSnapshot.failureHistory':                            'S S S TS TS TS S S S S S S',
  'FailureSnapshot.failureHistory[].atMs':                     'S S S TS TS TS S ok S S S S',
  'FailureSnapshot.failureHistory[].error':                    ['S S S TS TS TS S S S S S ok', 'cut to 4096 bytes on restore, as recordFailure cuts'],
  'FailureSnapshot.failureHistory[].state':                    'S S S TS TS TS S S S S S S',
  'FailureBreaker#save(path)':                                 'TA TA TA TA TA TA TA TA TA TA TA IO',
  'FailureBreaker#load(path)':                                 'TA TA TA TA TA TA TA TA TA TA TA IO',
  'FailureBreaker#call(fn)':                                   ['TA TA TA TA TA TA TA TA TA TA TA TA', 'every outcome is a rejected promise'],
  'FailureBreaker#call(fn, ...args): an argument':             ['ok ok ok ok ok ok ok ok ok ok ok ok', 'passed on to fn as it is'],
  'FailureBreaker#on(type, listener): type':                   'A A A TA TA TA A A A A A A',
  'FailureBreaker#on(type, listener): listener':               'TA TA TA TA TA TA TA TA TA TA TA TA',
  'FailureBreaker#off(type, listener): type':                  ['ok ok ok ok ok ok ok ok ok ok ok ok', 'nothing registered: nothing to remove'],
  'FailureBreaker#off(type, listener): listener':              ['ok ok ok ok ok ok ok ok ok ok ok ok', 'nothing registered: nothing to remove'],
  'new StagnationBreaker(config)':                             'C ok ok TC TC TC C C C C C C',
  'new StagnationBreaker(config, clock): clock':               'TA ok ok TA TA TA TA TA TA TA TA TA',
  'StagnationConfig.noProgressThreshold':                      'C ok ok TC TC TC C C C C C C',
  'StagnationConfig.sameErrorThreshold':                       'C ok ok TC TC TC C C C C C C',
  'StagnationConfig.outputDeclineThreshold':                   'C ok ok TC TC TC C C C C C C',
  'StagnationConfig.errorMatch':                               'C ok ok TC TC TC C C C C C C',
  'StagnationConfig.repeatThreshold':                          'C ok ok TC TC TC C ok C C C C',
  'StagnationConfig.cycleRepeats':                             'C ok ok TC TC TC C ok C C C C',
  'StagnationConfig.maxCycleLength':                           'C ok ok TC TC TC C C C C C C',
  'StagnationConfig.failStreakThreshold':                      'C ok ok TC TC TC C ok C C C C',
  'StagnationConfig.failStreakDistinct':                       'C ok ok TC TC TC C C C C C C',
  'StagnationConfig.failWindow':                               'C ok ok TC TC TC C ok C C C C',
  'StagnationConfig.failWindowPercent':                        'C ok ok TC TC TC C C C C C C',
  'StagnationBreaker#recordProgress(metrics)':                 'A A A TA TA TA A A A A A A',
  'IterationMetrics.filesChanged':                             'A ok ok TA TA TA A ok A A A A',
  'IterationMetrics.testsPassing':                             'A ok ok TA TA TA A ok A A A A',
  'IterationMetrics.outputLength':                             'A ok ok TA TA TA A ok A A A A',
  'StagnationBreaker#recordError(error)':                      'TA TA TA TA TA TA TA TA TA TA TA ok',
  'StagnationBreaker#recordError(error, options)':             'TA ok ok TA TA TA TA TA TA TA TA TA',
  'RecordErrorOptions.transient':                              'TA ok ok TA TA TA TA TA TA TA TA TA',
  'StagnationBreaker#recordStep(step)':                        'A A A TA TA TA A A A A A A',
  'AgentStep.action':                                          'A A A TA TA TA A A A A A ok',
  'AgentStep.result':                                          'A ok ok TA TA TA A A A A A ok',
  'AgentStep.failed':                                          'A ok ok TA TA TA A A A A A A',
  'StagnationBreaker#check() (extra argument)':                'ok ok ok ok ok ok ok ok ok ok ok ok',
  'StagnationBreaker#getStatus() (extra argument)':            'ok ok ok ok ok ok ok ok ok ok ok ok',
  'StagnationBreaker#reset() (extra argument)':                'ok ok ok ok ok ok ok ok ok ok ok ok',
  'StagnationBreaker#snapshot() (extra argument)':             'ok ok ok ok ok ok ok ok ok ok ok ok',
  'StagnationBreaker#restore(snapshot)':                       'S S S TS TS TS S S S S S S',
  'StagnationSnapshot.version':                                'S S S TS TS TS S S S S S S',
  'StagnationSnapshot.kind':                                   'S S S TS TS TS S S S S S S',
  'StagnationSnapshot.state':                                  'S S S TS TS TS S S S S S S',
  'StagnationSnapshot.consecutiveNoProgress':                  'S S S TS TS TS S ok S S S S',
  'StagnationSnapshot.errorCounts':                            'S S S TS TS TS S S S S S S',
  'StagnationSnapshot.outputTrend':                            'S S S TS TS TS S S S S S S',
  'StagnationSnapshot.lastProgress':                           'S ok ok TS TS TS S ok S S S S',
  'StagnationSnapshot.baselineOutputs':                        'S S S TS TS TS S S S S S S',
  'StagnationSnapshot.bestTestsPassing':                       'S S S TS TS TS S ok S S S S',
  'StagnationSnapshot.reason':                                 ['S ok ok TS TS TS S S S S S ok', 'cut to 4096 bytes on restore (check() repeats it)'],
  'StagnationSnapshot.errorCounts: a count':                   ['S S ok TS TS TS S ok S S S S', 'undefined drops the key'],
  'StagnationSnapshot.outputTrend: a length':                  'S S S TS TS TS S ok S S S S',
  'new BudgetBreaker(config)':                                 'C ok ok TC TC TC C C C C C C',
  'new BudgetBreaker(config, clock): clock':                   'TA ok ok TA TA TA TA TA TA TA TA TA',
  'BudgetConfig.maxToolCallsPerTask':                          'C ok ok TC TC TC C C C C C C',
  'BudgetConfig.maxTokenSpendCentsPerTask':                    'C ok ok TC TC TC C C C C C C',
  'BudgetConfig.maxTaskDurationSecs':                          'C ok ok TC TC TC C C C C C C',
  'BudgetConfig.maxIdleSecs':                                  'C ok ok TC TC TC C C C C C C',
  'BudgetConfig.similarityJaccardThreshold':                   'C ok ok TC TC TC C C C C C C',
  'BudgetConfig.loopWindow':                                   'C ok ok TC TC TC C C C C C C',
  'BudgetConfig.maxTokensPerOutput':                           'C ok ok TC TC TC C C C C C C',
  'BudgetConfig.prices':                                       'C ok ok TC TC TC C C C C C C',
  'BudgetConfig.prices[\'*\']':                                'C C ok TC TC TC C C C C C C',
  'Price.input':                                               ['C C ok TC TC TC C ok ok C C C', 'above 1e12 (cents per million tokens) is INVALID_CONFIG, so that spend stays finite'],
  'Price.output':                                              'C C ok TC TC TC C ok ok C C C',
  'Price.cacheWrite':                                          'C C ok TC TC TC C ok ok C C C',
  'Price.cacheRead':                                           'C C ok TC TC TC C ok ok C C C',
  'BudgetBreaker#ingest(event)':                               'E E E TE TE TE E E E E E E',
  'AgentEvent.type':                                           ['E E E TE TE TE E E E E E ok', 'an unknown type is counted in ignoredEvents'],
  'AgentEvent.taskId (tool_use)':                              'E ok ok TE TE TE E E E E E E',
  'AgentEvent.name (tool_use)':                                'E E E TE TE TE E E E E E ok',
  'AgentEvent.input (tool_use)':                               ['TE ok ok TE TE TE ok ok ok ok ok ok', 'any JSON value'],
  'AgentEvent.text (assistant)':                               'E E E TE TE TE E E E E E ok',
  'AgentEvent.phase (heartbeat)':                              'E E E TE TE TE E E E E E E',
  'AgentEvent.model (usage)':                                  'E ok ok TE TE TE E E E E E ok',
  'AgentEvent.usage (usage)':                                  'E E E TE TE TE E E E E E E',
  'AgentEvent.usage.input_tokens':                             'E ok ok TE TE TE E ok E E E E',
  'AgentEvent.usage.output_tokens':                            'E ok ok TE TE TE E ok E E E E',
  'AgentEvent.usage.cache_creation_input_tokens':              'E ok ok TE TE TE E ok E E E E',
  'AgentEvent.usage.cache_read_input_tokens':                  'E ok ok TE TE TE E ok E E E E',
  'BudgetBreaker#tick() (extra argument)':                     'ok ok ok ok ok ok ok ok ok ok ok ok',
  'BudgetBreaker#snapshot() (extra argument)':                 'ok ok ok ok ok ok ok ok ok ok ok ok',
  'BudgetBreaker#reset() (extra argument)':                    'ok ok ok ok ok ok ok ok ok ok ok ok',
  'new ExitStrategy(config)':                                  'C ok ok TC TC TC C C C C C C',
  'new ExitStrategy(config, clock): clock':                    'TA ok ok TA TA TA TA TA TA TA TA TA',
  'StrategyConfig.type (no type)':                             'C C C TC TC TC C C C C C C',
  'StrategyConfig.threshold (done_signals)':                   'C ok ok TC TC TC C ok C C C C',
  'StrategyConfig.window (done_signals)':                      'C ok ok TC TC TC C C C C C C',
  'StrategyConfig.mode (composite)':                           'C ok ok TC TC TC C C C C C C',
  'StrategyConfig.members (composite)':                        'C C C TC TC TC C C C C C C',
  'StrategyConfig.steps (fix_plan)':                           'C C C TC TC TC C C C C C C',
  'StrategyConfig.markdown (fix_plan)':                        'C C C TC TC TC C C C C C ok',
  'StrategyConfig.maxAttempts (fix_plan)':                     'C ok ok TC TC TC C C C C C C',
  'StrategyConfig.members[] (composite)':                      'C C C TC TC TC C C C C C C',
  'FixStepConfig.description':                                 'C C C TC TC TC C C C C C ok',
  'FixStepConfig.completed':                                   'C ok ok TC TC TC C C C C C C',
  'FixStepConfig.attempts':                                    'C ok ok TC TC TC C ok C C C C',
  'FixStepConfig.maxAttempts':                                 'C ok ok TC TC TC C C C C C C',
  'ExitStrategy#shouldExit(analysis)':                         'A A A TA TA TA A A A A A A',
  'Analysis.completionSignal':                                 'A A A TA TA TA A A A A A A',
  'Analysis.completionSignal.detected':                        'A A A TA TA TA A A A A A A',
  'Analysis.completionSignal.confidence':                      'A A A TA TA TA A ok A A A A',
  'Analysis.completionSignal.phrases':                         'A A A TA TA TA A A A A A A',
  'Analysis.confidence':                                       'A A A TA TA TA A ok A A A A',
  'Analysis.exitSignal':                                       'A ok ok TA TA TA A A A A A A',
  'Analysis.testsPassing':                                     'A ok ok TA TA TA A ok A A A A',
  'Analysis.testsFailing':                                     'A ok ok TA TA TA A ok A A A A',
  'ExitStrategy#shouldExit(analysis, circuitState)':           'TA ok ok TA TA TA TA TA TA TA TA A',
  'ExitStrategy#planStatus() (extra argument)':                'ok ok ok ok ok ok ok ok ok ok ok ok',
  'ExitStrategy#reset() (extra argument)':                     'ok ok ok ok ok ok ok ok ok ok ok ok',
  'new FixPlan(config)':                                       'C C C TC TC TC C C C C C C',
  'new FixPlan(config, clock): clock':                         'TA ok ok TA TA TA TA TA TA TA TA TA',
  'FixPlan.fromMarkdown(markdown)':                            'TA TA TA TA TA TA TA TA TA TA TA ok',
  'FixPlan.fromMarkdown(markdown, maxAttempts)':               'C ok ok TC TC TC C C C C C C',
  'FixPlan.fromMarkdown(markdown, maxAttempts, clock): clock': 'TA ok ok TA TA TA TA TA TA TA TA TA',
  'FixPlan#shouldExit(analysis)':                              'A A A TA TA TA A A A A A A',
  'FixPlan#shouldExit(analysis, circuitState)':                'TA ok ok TA TA TA TA TA TA TA TA A',
  'FixPlan#getStatus() (extra argument)':                      'ok ok ok ok ok ok ok ok ok ok ok ok',
  'FixPlan#reset() (extra argument)':                          'ok ok ok ok ok ok ok ok ok ok ok ok',
  'new Loop(config)':                                          'C ok ok TC TC TC C C C C C C',
  'new Loop(config, clock): clock':                            'TA ok ok TA TA TA TA TA TA TA TA TA',
  'LoopConfig.maxIterations':                                  'C ok ok TC TC TC C C C C C C',
  'LoopConfig.strategy':                                       'C ok ok TC TC TC C C C C C C',
  'LoopConfig.stagnation':                                     'C ok ok TC TC TC C C C C C C',
  'LoopConfig.budget':                                         'C ok ok TC TC TC C C C C C C',
  'Loop#observe(observation)':                                 'A A A TA TA TA A A A A A A',
  'Observation.output':                                        'A A A TA TA TA A A A A A ok',
  'Observation.filesChanged':                                  'A ok ok TA TA TA A ok A A A A',
  'Observation.testsPassing':                                  'A ok ok TA TA TA A ok A A A A',
  'Observation.error':                                         'A ok ok TA TA TA A A A A A ok',
  'Observation.events':                                        'A ok ok TA TA TA A A A A A A',
  'Observation.events[]':                                      ['E E E TA TA TA E E E E E E', 'NaN and ±Infinity are refused while the observation is converted (INVALID_ARGUMENT), other values by the loop (INVALID_EVENT; this loop has no budget)'],
  'Loop#getStatus() (extra argument)':                         'ok ok ok ok ok ok ok ok ok ok ok ok',
  'Loop#reset() (extra argument)':                             'ok ok ok ok ok ok ok ok ok ok ok ok',
  'new Monitor(config)':                                       'C ok ok TC TC TC C C C C C C',
  'new Monitor(config, clock): clock':                         'TA ok ok TA TA TA TA TA TA TA TA TA',
  'MonitorConfig.clock':                                       'TA ok ok TA TA TA TA TA TA TA TA TA',
  'MonitorConfig.profile':                                     'C ok ok TC TC TC C C C C C C',
  'MonitorConfig.failure':                                     'C ok ok TC TC TC C C C C C C',
  'MonitorConfig.stagnation':                                  'C ok ok TC TC TC C C C C C C',
  'MonitorConfig.budget':                                      'C ok ok TC TC TC C C C C C C',
  'MonitorConfig.toolLimits':                                  'C ok ok TC TC TC C C C C C C',
  'MonitorConfig.warnBefore':                                  'C ok ok TC TC TC C ok C C C C',
  'MonitorConfig.budgetWarnPercent':                           'C ok ok TC TC TC C ok C C C C',
  'MonitorConfig.toolLimits: a limit':                         ['C C ok TC TC TC C ok C C C C', 'a limit is a whole number >= 0 (null is refused: the table is not a config field)'],
  'Monitor#observe(event)':                                    'E E E TE TE TE E E E E E E',
  'MonitorEvent.type':                                         ['E E E TE TE TE E E E E E ok', 'an unknown type is counted in ignoredEvents'],
  'MonitorEvent.taskId (tool_use)':                            'E ok ok TE TE TE E E E E E E',
  'MonitorEvent.name (tool_use)':                              'E E E TE TE TE E E E E E ok',
  'MonitorEvent.input (tool_use)':                             ['TE ok ok TE TE TE ok ok ok ok ok ok', 'any JSON value'],
  'MonitorEvent.id (tool_use)':                                ['E ok ok TE TE TE E E E E E ok', 'cut to 256 bytes'],
  'MonitorEvent.ok (tool_result)':                             'E E E TE TE TE E E E E E E',
  'MonitorEvent.text (tool_result)':                           'E ok ok TE TE TE E E E E E ok',
  'MonitorEvent.id (tool_result)':                             'E ok ok TE TE TE E E E E E ok',
  'MonitorEvent.name (tool_result)':                           'E ok ok TE TE TE E E E E E ok',
  'MonitorEvent.text (assistant)':                             'E E E TE TE TE E E E E E ok',
  'MonitorEvent.model (usage)':                                'E ok ok TE TE TE E E E E E ok',
  'MonitorEvent.usage (usage)':                                'E E E TE TE TE E E E E E E',
  'MonitorEvent.costCents (usage)':                            ['E E E TE TE TE E ok ok E E E', 'without it the usage event has neither usage nor costCents; above 1e15 is refused'],
  'MonitorEvent.text (error)':                                 'E E E TE TE TE E E E E E ok',
  'MonitorEvent.transient (error)':                            'E ok ok TE TE TE E E E E E E',
  'MonitorEvent.files (progress)':                             'E ok ok TE TE TE E ok E E E E',
  'MonitorEvent.testsPassing (progress)':                      'E ok ok TE TE TE E ok E E E E',
  'MonitorEvent.digest (progress)':                            ['E ok ok TE TE TE E E E E E ok', 'cut to 256 bytes'],
  'MonitorEvent.phase (heartbeat)':                            'E E E TE TE TE E E E E E E',
  'Monitor#tick() (extra argument)':                           'ok ok ok ok ok ok ok ok ok ok ok ok',
  'Monitor#status() (extra argument)':                         'ok ok ok ok ok ok ok ok ok ok ok ok',
  'Monitor#snapshot() (extra argument)':                       'ok ok ok ok ok ok ok ok ok ok ok ok',
  'Monitor#reset() (extra argument)':                          'ok ok ok ok ok ok ok ok ok ok ok ok',
  'Monitor#restore(snapshot)':                                 'S S S TS TS TS S S S S S S',
  'MonitorSnapshot.version':                                   'S S S TS TS TS S S S S S S',
  'MonitorSnapshot.kind':                                      'S S S TS TS TS S S S S S S',
  'MonitorSnapshot.tasks':                                     'S S S TS TS TS S S S S S S',
  'MonitorSnapshot.stack':                                     'S S S TS TS TS S S S S S S',
  'MonitorSnapshot.ignoredEvents':                             'S S S TS TS TS S ok S S S S',
  'MonitorSnapshot.lastEventAt':                               'S ok ok TS TS TS S ok S S S S',
  'Monitor#on(type, listener): type':                          'A A A TA TA TA A A A A A A',
  'new AgentHaltedError(verdict)':                             ['TA TA TA TA TA TA TA TA TA TA TA ok', 'a string is the message of a halt without a rule; an object is taken as the verdict'],
}

const SUBJECTS = {
  module: { make: () => null, works: moduleWorks },
  made: { make: () => null, works: moduleWorks },
  failure: { make: () => new ab.FailureBreaker({ failureThreshold: 3 }, new ab.ManualClock(0)), works: failureWorks },
  stagnation: { make: () => new ab.StagnationBreaker({}, new ab.ManualClock(0)), works: stagnationWorks },
  budget: { make: () => new ab.BudgetBreaker({}, new ab.ManualClock(0)), works: budgetWorks },
  strategy: { make: () => new ab.ExitStrategy(), works: strategyWorks },
  plan: { make: () => new ab.FixPlan({ steps: [{ description: 'fix the parser' }] }), works: strategyWorks },
  loop: { make: () => new ab.Loop({ maxIterations: 1000 }, new ab.ManualClock(0)), works: loopWorks },
  monitor: { make: () => new ab.Monitor({ clock: new ab.ManualClock(0) }), works: monitorWorks },
  clock: { make: () => new ab.ManualClock(0), works: clockWorks },
  system: { make: () => new ab.SystemClock(), works: (c) => assert.equal(typeof c.now(), 'number') },
}

const ROWS = []

/**
 * A row: `entry` (how the doc names the input), `subject` (a key of SUBJECTS: the object the
 * row's calls go to, made once per row), `wrong` (the wrong-type value), `run(subject, value)`,
 * and the expected outcome per column.
 */
function row(entry, subject, wrong, run, note = '') {
  assert.ok(entry in EXPECT, `${entry}: no expected outcomes in EXPECT`)
  assert.ok(!ROWS.some((r) => r.entry === entry), `${entry}: two rows`)
  const [expect, expectNote] = Array.isArray(EXPECT[entry]) ? EXPECT[entry] : [EXPECT[entry], '']
  const tokens = expect.trim().split(/\s+/)
  assert.equal(tokens.length, COLUMNS.length, `${entry}: ${tokens.length} outcomes`)
  for (const t of tokens) assert.ok(t in OUTCOMES, `${entry}: unknown outcome ${t}`)
  ROWS.push({ entry, subject, wrong, run, expect: tokens, note: expectNote || note })
}

/** A method without parameters, called with one extra argument. */
function noParams(entry, subject, run) {
  row(`${entry} (extra argument)`, subject, 'extra', run, 'arguments beyond the declared ones are ignored')
}

/** The `clock` argument of a constructor. */
function clockArgument(entry, make) {
  row(`${entry}: clock`, 'made', {}, (_, v) => make(v),
    'null and undefined mean the system clock; anything but a ManualClock or SystemClock is refused')
}

// Module functions ----------------------------------------------------------------------------

row('analyze(text)', 'module', 42, (_, v) => ab.analyze(v))
row('fingerprint(error)', 'module', 42, (_, v) => ab.fingerprint(v))
row('fingerprint(error, mode)', 'module', 42, (_, v) => ab.fingerprint('boom', v))
row('configFromEnv(env)', 'module', 'AGENTBREAKER_TOOL_CAP=5', (_, v) => ab.configFromEnv(v))
row('configFromEnv(env): a variable', 'module', 5, (_, v) => ab.configFromEnv({ AGENTBREAKER_TOOL_CAP: v }))
row('profile(name)', 'module', 42, (_, v) => ab.profile(v))
noParams('profileNames()', 'module', (_, v) => ab.profileNames(v))

// Clocks ---------------------------------------------------------------------------------------

row('new ManualClock(startMs)', 'made', '5', (_, v) => new ab.ManualClock(v))
row('ManualClock#set(ms)', 'clock', '5', (c, v) => c.set(v))
row('ManualClock#advance(ms)', 'clock', '5', (c, v) => c.advance(v))
noParams('ManualClock#now()', 'clock', (c, v) => c.now(v))
noParams('new SystemClock()', 'made', (_, v) => new ab.SystemClock(v))
noParams('SystemClock#now()', 'system', (c, v) => c.now(v))

// FailureBreaker -------------------------------------------------------------------------------

row('new FailureBreaker(config)', 'made', 'strict', (_, v) => new ab.FailureBreaker(v))
clockArgument('new FailureBreaker(config, clock)', (v) => new ab.FailureBreaker({}, v))
for (const [field, wrong] of [
  ['failureThreshold', '5'],
  ['warningThreshold', '3'],
  ['cooldownMs', '30000'],
  ['backoffMultiplier', '2'],
  ['maxCooldownMs', '3600000'],
  ['identicalErrorThreshold', '3'],
  ['historyLimit', '100'],
  ['halfOpenMaxProbes', '1'],
  ['probeTimeoutMs', '30000'],
  ['errorMatch', 5],
  ['statePath', 5],
]) {
  row(`FailureConfig.${field}`, 'made', wrong, (_, v) => new ab.FailureBreaker({ [field]: v }))
}
noParams('FailureBreaker#recordSuccess()', 'failure', (b, v) => b.recordSuccess(v))
row('FailureBreaker#recordFailure(error)', 'failure', new Error('boom'), (b, v) => b.recordFailure(v))
noParams('FailureBreaker#shouldAllowOperation()', 'failure', (b, v) => b.shouldAllowOperation(v))
noParams('FailureBreaker#tryAcquire()', 'failure', (b, v) => b.tryAcquire(v))
noParams('FailureBreaker#getStatus()', 'failure', (b, v) => b.getStatus(v))
noParams('FailureBreaker#metrics()', 'failure', (b, v) => b.metrics(v))
noParams('FailureBreaker#reset()', 'failure', (b, v) => b.reset(v))
noParams('FailureBreaker#snapshot()', 'failure', (b, v) => b.snapshot(v))
row('FailureBreaker#restore(snapshot)', 'failure', 'snapshot', (b, v) => b.restore(v))
for (const [field, wrong] of [
  ['version', '1'],
  ['kind', 5],
  ['state', 5],
  ['consecutiveFailures', '2'],
  ['openedAt', '1000'],
  ['backoffLevel', '1'],
  ['trips', '1'],
  ['failureHistory', 'none'],
]) {
  row(`FailureSnapshot.${field}`, 'failure', wrong, (b, v) => b.restore({ ...failureSnapshot(), [field]: v }))
}
for (const [field, wrong] of [
  ['atMs', '1000'],
  ['error', 5],
  ['state', 5],
]) {
  row(`FailureSnapshot.failureHistory[].${field}`, 'failure', wrong,
    (b, v) => b.restore({ ...failureSnapshot(), failureHistory: [{ ...failureRecord(), [field]: v }] }))
}
row('FailureBreaker#save(path)', 'failure', 42, (b, v) => b.save(v))
row('FailureBreaker#load(path)', 'failure', 42, (b, v) => b.load(v))
row('FailureBreaker#call(fn)', 'failure', 'fn', (b, v) => b.call(v))
row('FailureBreaker#call(fn, ...args): an argument', 'failure', 'text', (b, v) => b.call((x) => x, v))
row('FailureBreaker#on(type, listener): type', 'failure', 42, (b, v) => b.on(v, () => {}))
row('FailureBreaker#on(type, listener): listener', 'failure', 'fn', (b, v) => b.on('warning', v))
row('FailureBreaker#off(type, listener): type', 'failure', 42, (b, v) => b.off(v, () => {}))
row('FailureBreaker#off(type, listener): listener', 'failure', 'fn', (b, v) => b.off('warning', v))

function failureSnapshot() {
  return {
    version: 1,
    kind: 'failure',
    state: 'CLOSED',
    consecutiveFailures: 1,
    openedAt: null,
    backoffLevel: 0,
    trips: 0,
    failureHistory: [failureRecord()],
  }
}

function failureRecord() {
  return { atMs: 0, error: 'boom', state: 'CLOSED' }
}

// StagnationBreaker ----------------------------------------------------------------------------

row('new StagnationBreaker(config)', 'made', 'strict', (_, v) => new ab.StagnationBreaker(v))
clockArgument('new StagnationBreaker(config, clock)', (v) => new ab.StagnationBreaker({}, v))
for (const [field, wrong] of [
  ['noProgressThreshold', '3'],
  ['sameErrorThreshold', '5'],
  ['outputDeclineThreshold', '70'],
  ['errorMatch', 5],
  ['repeatThreshold', '3'],
  ['cycleRepeats', '2'],
  ['maxCycleLength', '5'],
  ['failStreakThreshold', '4'],
  ['failStreakDistinct', '2'],
  ['failWindow', '10'],
  ['failWindowPercent', '90'],
]) {
  row(`StagnationConfig.${field}`, 'made', wrong, (_, v) => new ab.StagnationBreaker({ [field]: v }))
}
row('StagnationBreaker#recordProgress(metrics)', 'stagnation', 5, (s, v) => s.recordProgress(v))
for (const field of ['filesChanged', 'testsPassing', 'outputLength']) {
  row(`IterationMetrics.${field}`, 'stagnation', '1', (s, v) => s.recordProgress({ [field]: v }))
}
row('StagnationBreaker#recordError(error)', 'stagnation', new Error('boom'), (s, v) => s.recordError(v))
row('StagnationBreaker#recordError(error, options)', 'stagnation', true, (s, v) => s.recordError('boom', v))
row('RecordErrorOptions.transient', 'stagnation', 'yes', (s, v) => s.recordError('boom', { transient: v }))
row('StagnationBreaker#recordStep(step)', 'stagnation', 'bash: ls', (s, v) => s.recordStep(v))
for (const [field, wrong] of [
  ['action', 42],
  ['result', 42],
  ['failed', 'yes'],
]) {
  row(`AgentStep.${field}`, 'stagnation', wrong, (s, v) => s.recordStep({ action: 'bash: ls', [field]: v }))
}
noParams('StagnationBreaker#check()', 'stagnation', (s, v) => s.check(v))
noParams('StagnationBreaker#getStatus()', 'stagnation', (s, v) => s.getStatus(v))
noParams('StagnationBreaker#reset()', 'stagnation', (s, v) => s.reset(v))
noParams('StagnationBreaker#snapshot()', 'stagnation', (s, v) => s.snapshot(v))
row('StagnationBreaker#restore(snapshot)', 'stagnation', 'snapshot', (s, v) => s.restore(v))
for (const [field, wrong] of [
  ['version', '1'],
  ['kind', 5],
  ['state', 5],
  ['consecutiveNoProgress', '1'],
  ['errorCounts', 'none'],
  ['outputTrend', 'none'],
  ['lastProgress', '1000'],
  ['baselineOutputs', 'none'],
  ['bestTestsPassing', '1'],
  ['reason', 5],
]) {
  row(`StagnationSnapshot.${field}`, 'stagnation', wrong, (s, v) => s.restore({ ...stagnationSnapshot(), [field]: v }))
}
row('StagnationSnapshot.errorCounts: a count', 'stagnation', '1', (s, v) => s.restore({ ...stagnationSnapshot(), errorCounts: { boom: v } }))
row('StagnationSnapshot.outputTrend: a length', 'stagnation', '1', (s, v) => s.restore({ ...stagnationSnapshot(), outputTrend: [v] }))

function stagnationSnapshot() {
  return {
    version: 1,
    kind: 'stagnation',
    state: 'CLOSED',
    consecutiveNoProgress: 0,
    errorCounts: {},
    outputTrend: [100],
    lastProgress: null,
    baselineOutputs: [100],
    bestTestsPassing: 0,
    reason: null,
  }
}

// BudgetBreaker --------------------------------------------------------------------------------

row('new BudgetBreaker(config)', 'made', 'strict', (_, v) => new ab.BudgetBreaker(v))
clockArgument('new BudgetBreaker(config, clock)', (v) => new ab.BudgetBreaker({}, v))
for (const [field, wrong] of [
  ['maxToolCallsPerTask', '50'],
  ['maxTokenSpendCentsPerTask', '5000'],
  ['maxTaskDurationSecs', '1800'],
  ['maxIdleSecs', '300'],
  ['similarityJaccardThreshold', '0.95'],
  ['loopWindow', '3'],
  ['maxTokensPerOutput', '512'],
  ['prices', 5],
]) {
  row(`BudgetConfig.${field}`, 'made', wrong, (_, v) => new ab.BudgetBreaker({ [field]: v }))
}
row("BudgetConfig.prices['*']", 'made', 5, (_, v) => new ab.BudgetBreaker({ prices: { '*': v } }))
for (const field of ['input', 'output', 'cacheWrite', 'cacheRead']) {
  row(`Price.${field}`, 'made', '300', (_, v) => new ab.BudgetBreaker({ prices: { '*': { [field]: v } } }))
}
row('BudgetBreaker#ingest(event)', 'budget', 'tool_use', (b, v) => b.ingest(v))
const EVENT_FIELDS = [
  ['type', 5, { name: 'bash' }],
  ['taskId', 5, { type: 'tool_use', name: 'bash' }],
  ['name', 5, { type: 'tool_use' }],
  ['input', () => 1, { type: 'tool_use', name: 'bash' }],
  ['text', 5, { type: 'assistant' }],
  ['phase', 5, { type: 'heartbeat', taskId: 'task-1' }],
  ['model', 5, { type: 'usage', usage: { input_tokens: 10 } }],
  ['usage', 5, { type: 'usage', model: 'claude-sonnet-4' }],
]
for (const [field, wrong, base] of EVENT_FIELDS) {
  row(`AgentEvent.${field}${base.type ? ` (${base.type})` : ''}`, 'budget', wrong, (b, v) => b.ingest({ ...base, [field]: v }))
}
for (const field of ['input_tokens', 'output_tokens', 'cache_creation_input_tokens', 'cache_read_input_tokens']) {
  row(`AgentEvent.usage.${field}`, 'budget', '10', (b, v) => b.ingest({ type: 'usage', usage: { [field]: v } }))
}
noParams('BudgetBreaker#tick()', 'budget', (b, v) => b.tick(v))
noParams('BudgetBreaker#snapshot()', 'budget', (b, v) => b.snapshot(v))
noParams('BudgetBreaker#reset()', 'budget', (b, v) => b.reset(v))

// ExitStrategy, FixPlan ------------------------------------------------------------------------

row('new ExitStrategy(config)', 'made', 'auto', (_, v) => new ab.ExitStrategy(v))
clockArgument('new ExitStrategy(config, clock)', (v) => new ab.ExitStrategy(null, v))
for (const [field, wrong, base] of [
  ['type', 5, {}],
  ['threshold', '2', { type: 'done_signals' }],
  ['window', '5', { type: 'done_signals' }],
  ['mode', 5, { type: 'composite', members: [{ type: 'auto' }] }],
  ['members', 'auto', { type: 'composite' }],
  ['steps', 'fix it', { type: 'fix_plan' }],
  ['markdown', 5, { type: 'fix_plan' }],
  ['maxAttempts', '3', { type: 'fix_plan', steps: [{ description: 'fix it' }] }],
]) {
  row(`StrategyConfig.${field} (${base.type || 'no type'})`, 'made', wrong, (_, v) => new ab.ExitStrategy({ ...base, [field]: v }))
}
row('StrategyConfig.members[] (composite)', 'made', 'auto', (_, v) => new ab.ExitStrategy({ type: 'composite', members: [v] }))
for (const [field, wrong] of [
  ['description', 5],
  ['completed', 'yes'],
  ['attempts', '1'],
  ['maxAttempts', '3'],
]) {
  row(`FixStepConfig.${field}`, 'made', wrong, (_, v) => new ab.FixPlan({ steps: [{ description: 'fix it', [field]: v }] }))
}
row('ExitStrategy#shouldExit(analysis)', 'strategy', 'done', (s, v) => s.shouldExit(v))
for (const [field, wrong] of [
  ['completionSignal', 'yes'],
  ['completionSignal.detected', 'yes'],
  ['completionSignal.confidence', '40'],
  ['completionSignal.phrases', 'done'],
  ['confidence', '40'],
  ['exitSignal', 'yes'],
  ['testsPassing', '3'],
  ['testsFailing', '0'],
]) {
  row(`Analysis.${field}`, 'strategy', wrong, (s, v) => s.shouldExit(analysisWith(field, v)))
}
row('ExitStrategy#shouldExit(analysis, circuitState)', 'strategy', 5, (s, v) => s.shouldExit(ab.analyze('working'), v))
noParams('ExitStrategy#planStatus()', 'strategy', (s, v) => s.planStatus(v))
noParams('ExitStrategy#reset()', 'strategy', (s, v) => s.reset(v))
row('new FixPlan(config)', 'made', '- [ ] fix it', (_, v) => new ab.FixPlan(v))
clockArgument('new FixPlan(config, clock)', (v) => new ab.FixPlan({ steps: [{ description: 'fix it' }] }, v))
row('FixPlan.fromMarkdown(markdown)', 'made', 42, (_, v) => ab.FixPlan.fromMarkdown(v))
row('FixPlan.fromMarkdown(markdown, maxAttempts)', 'made', '3', (_, v) => ab.FixPlan.fromMarkdown('- [ ] fix it', v))
clockArgument('FixPlan.fromMarkdown(markdown, maxAttempts, clock)', (v) => ab.FixPlan.fromMarkdown('- [ ] fix it', null, v))
row('FixPlan#shouldExit(analysis)', 'plan', 'done', (s, v) => s.shouldExit(v))
row('FixPlan#shouldExit(analysis, circuitState)', 'plan', 5, (s, v) => s.shouldExit(ab.analyze('working'), v))
noParams('FixPlan#getStatus()', 'plan', (s, v) => s.getStatus(v))
noParams('FixPlan#reset()', 'plan', (s, v) => s.reset(v))

function analysisWith(field, value) {
  const analysis = ab.analyze('working on it')
  const [head, tail] = field.split('.')
  if (tail === undefined) analysis[head] = value
  else analysis[head][tail] = value
  return analysis
}

// Loop -----------------------------------------------------------------------------------------

row('new Loop(config)', 'made', 'auto', (_, v) => new ab.Loop(v))
clockArgument('new Loop(config, clock)', (v) => new ab.Loop({}, v))
for (const [field, wrong] of [
  ['maxIterations', '50'],
  ['strategy', 'auto'],
  ['stagnation', 'default'],
  ['budget', 'default'],
]) {
  row(`LoopConfig.${field}`, 'made', wrong, (_, v) => new ab.Loop({ [field]: v }))
}
row('Loop#observe(observation)', 'loop', 'working', (l, v) => l.observe(v))
for (const [field, wrong] of [
  ['output', 42],
  ['filesChanged', '1'],
  ['testsPassing', '3'],
  ['error', new Error('boom')],
  ['events', 'tool_use'],
]) {
  row(`Observation.${field}`, 'loop', wrong, (l, v) => l.observe({ output: 'working', [field]: v }))
}
row('Observation.events[]', 'loop', 'tool_use', (l, v) => l.observe({ output: 'working', events: [v] }))
noParams('Loop#getStatus()', 'loop', (l, v) => l.getStatus(v))
noParams('Loop#reset()', 'loop', (l, v) => l.reset(v))

// Monitor, AgentHaltedError --------------------------------------------------------------------

row('new Monitor(config)', 'made', 'coding-agent', (_, v) => new ab.Monitor(v))
clockArgument('new Monitor(config, clock)', (v) => new ab.Monitor({}, v))
row('MonitorConfig.clock', 'made', {}, (_, v) => new ab.Monitor({ clock: v }),
  'null and undefined mean the system clock; anything but a ManualClock or SystemClock is refused')
for (const [field, wrong] of [
  ['profile', 5],
  ['failure', 'strict'],
  ['stagnation', 'strict'],
  ['budget', 'strict'],
  ['toolLimits', 'web_fetch'],
  ['warnBefore', '2'],
  ['budgetWarnPercent', '80'],
]) {
  row(`MonitorConfig.${field}`, 'made', wrong, (_, v) => new ab.Monitor({ [field]: v }))
}
row('MonitorConfig.toolLimits: a limit', 'made', '20', (_, v) => new ab.Monitor({ toolLimits: { web_fetch: v } }))
row('Monitor#observe(event)', 'monitor', 'tool_use', (m, v) => m.observe(v))
for (const [field, wrong, base] of [
  ['type', 5, { name: 'bash' }],
  ['taskId', 5, { type: 'tool_use', name: 'bash' }],
  ['name', 5, { type: 'tool_use' }],
  ['input', () => 1, { type: 'tool_use', name: 'bash' }],
  ['id', 5, { type: 'tool_use', name: 'bash' }],
  ['ok', 'yes', { type: 'tool_result' }],
  ['text', 5, { type: 'tool_result', ok: true }],
  ['id', 5, { type: 'tool_result', ok: true }],
  ['name', 5, { type: 'tool_result', ok: true }],
  ['text', 5, { type: 'assistant' }],
  ['model', 5, { type: 'usage', usage: { input_tokens: 10 } }],
  ['usage', 5, { type: 'usage', model: 'claude-sonnet-4' }],
  ['costCents', '1.5', { type: 'usage' }],
  ['text', 5, { type: 'error' }],
  ['transient', 'yes', { type: 'error', text: 'rate limited' }],
  ['files', 'src/a.py', { type: 'progress' }],
  ['testsPassing', '3', { type: 'progress' }],
  ['digest', 5, { type: 'progress', files: 1 }],
  ['phase', 5, { type: 'heartbeat', taskId: 'task-1' }],
]) {
  row(`MonitorEvent.${field}${base.type ? ` (${base.type})` : ''}`, 'monitor', wrong, (m, v) => m.observe({ ...base, [field]: v }))
}
noParams('Monitor#tick()', 'monitor', (m, v) => m.tick(v))
noParams('Monitor#status()', 'monitor', (m, v) => m.status(v))
noParams('Monitor#snapshot()', 'monitor', (m, v) => m.snapshot(v))
noParams('Monitor#reset()', 'monitor', (m, v) => m.reset(v))
row('Monitor#restore(snapshot)', 'monitor', 'snapshot', (m, v) => m.restore(v))
for (const [field, wrong] of [
  ['version', '1'],
  ['kind', 5],
  ['tasks', 'none'],
  ['stack', 'task-1'],
  ['ignoredEvents', '0'],
  ['lastEventAt', '1000'],
]) {
  row(`MonitorSnapshot.${field}`, 'monitor', wrong, (m, v) => m.restore({ ...monitorSnapshot(), [field]: v }))
}
row('Monitor#on(type, listener): type', 'monitor', 42, (m, v) => m.on(v, () => {}))
row('new AgentHaltedError(verdict)', 'module', 42, (_, v) => void new ab.AgentHaltedError(v))

function monitorSnapshot() {
  return { version: 1, kind: 'monitor', tasks: [], stack: [], ignoredEvents: 0, lastEventAt: null }
}

// ---------------------------------------------------------------------------------------------
// Running a cell.

/** What a call did, as a table token (or a description of a misbehaviour). */
async function outcomeOf(call) {
  let made
  try {
    made = call()
    if (made !== null && typeof made === 'object' && typeof made.then === 'function') {
      made = await made
    }
  } catch (error) {
    if (!(error instanceof Error)) return { token: `a thrown non-Error (${typeof error})` }
    const code = CODE_TOKENS[error.code]
    if (code === undefined) return { token: `${error.constructor.name} with code ${error.code}: ${error.message.slice(0, 200)}`, error }
    return { token: (error instanceof TypeError && code !== 'IO' ? 'T' : '') + code, error }
  }
  return { token: 'ok', made }
}

async function runCell(row, column, subject) {
  const value = column[1](row)
  const { token, error, made } = await outcomeOf(() => row.run(subject, value))
  const long = error !== undefined && error.message.length > MAX_MESSAGE
  return { token: long ? `${token} with a message of ${error.message.length} characters` : token, made }
}

async function checkCell(row, columnIndex, subject) {
  const column = COLUMNS[columnIndex]
  const { token, made } = await runCell(row, column, subject)
  assert.equal(outcomeText(token) ?? token, outcomeText(row.expect[columnIndex]), `${row.entry} <- ${column[0]}`)
  if (row.subject === 'made' && made !== undefined) madeWorks(made)
  SUBJECTS[row.subject].works(subject)
}

// ---------------------------------------------------------------------------------------------
// The document.

function renderDoc() {
  const head = ['entry point: input', ...COLUMNS.map((c) => c[0]), 'wrong-type value', 'notes']
  const lines = [
    '# Bad input: the Node surface',
    '',
    '<!-- Generated from node/test/bad_input.test.js (`node test/bad_input.test.js --write-doc` in',
    'node/); the test fails when this file differs from the table. -->',
    '',
    'What every public entry point of the `agentbreaker` npm package does with bad values: each row is',
    'one input (an argument, or a field of a config, option, event, observation, analysis or snapshot',
    'object, set on an otherwise valid value), each column a kind of value. Every cell is a test in',
    '`node/test/bad_input.test.js` (`make test-node-bad-input`): the documented outcome must come out,',
    'the process must not crash, an error must be an `Error` with a `code`, and the object must still',
    'work afterwards (each row runs all its cells on one object, with a health check after each).',
    '',
    'Outcomes:',
    '',
    '- **accepted**: the call returns normally (a constructor makes its object).',
    '- **TypeError CODE**: a `TypeError` with `err.code === CODE`: the binding refused the value',
    '  before the core saw it: a value JSON cannot hold (`NaN`, `±Infinity`, a function, a symbol, a',
    '  BigInt) anywhere in an argument, or a non-string for a string argument (a non-number for a',
    '  millisecond count). CODE is the code of the argument the value is in: a config',
    '  `INVALID_CONFIG`, an event `INVALID_EVENT`, a snapshot `INVALID_SNAPSHOT`, anything else',
    '  `INVALID_ARGUMENT`.',
    '- **CODE**: an `Error` with `err.code === CODE`: the core refused the value: a JSON value of the',
    '  wrong type for a field or an object argument, out of range, not a whole number, an unknown',
    '  name, inconsistent with another field.',
    '',
    `Every error message is at most ${MAX_MESSAGE} characters, the 10 MB string included: the core`,
    'cuts its messages at 1024 bytes (then `…`), so a huge bad value is quoted in part, never whole.',
    '',
    '`undefined` in an object field means the field is absent (as in `JSON.stringify`); `null` in a',
    "field of a config (FailureBreaker, StagnationBreaker, BudgetBreaker, strategy, loop, Monitor) means the",
    "field's default too, while an unknown key is refused, `null` or not. A price table's and a Monitor's",
    "`toolLimits` entries are not config fields: `null` for one is refused. A Monitor's clock comes in its",
    'options (`clock`) or second, as for the other classes; both at once is refused. The 10 MB',
    'string is 10 MiB of error-message lines. `call()` reports every outcome as a promise (a refusal',
    'is a rejected promise). Getters (`state`, `listenerErrors`) take no input and are not listed.',
    '',
    `${ROWS.length} rows × ${COLUMNS.length} columns = ${ROWS.length * COLUMNS.length} cells.`,
    '',
    `| ${head.join(' | ')} |`,
    `|${head.map(() => '---').join('|')}|`,
  ]
  for (const r of ROWS) {
    const cells = [
      `\`${r.entry}\``,
      ...r.expect.map(outcomeText),
      `\`${describeValue(r.wrong)}\``,
      r.note,
    ]
    lines.push(`| ${cells.join(' | ')} |`)
  }
  return lines.join('\n') + '\n'
}

function describeValue(value) {
  if (typeof value === 'string') return JSON.stringify(value)
  if (typeof value === 'function') return 'a function'
  if (value instanceof Error) return `new Error(${JSON.stringify(value.message)})`
  if (Array.isArray(value)) return JSON.stringify(value)
  if (value !== null && typeof value === 'object') return JSON.stringify(value)
  return String(value)
}

// ---------------------------------------------------------------------------------------------

async function observed() {
  for (const r of ROWS) {
    const subject = SUBJECTS[r.subject].make()
    const tokens = []
    for (const column of COLUMNS) {
      const { token, made } = await runCell(r, column, subject).catch((e) => ({ token: `!${e.message.slice(0, 80)}` }))
      tokens.push(token)
      try {
        if (r.subject === 'made' && made !== undefined) madeWorks(made)
        SUBJECTS[r.subject].works(subject)
      } catch (e) {
        tokens[tokens.length - 1] += `!health:${e.message.slice(0, 80)}`
      }
    }
    const same = tokens.join(' ') === r.expect.join(' ') ? '' : '   <-- differs'
    console.log(`${r.entry.padEnd(60)} ${tokens.join(' ')}${same}`)
  }
}

if (require.main === module && process.argv.includes('--write-doc')) {
  fs.mkdirSync(path.dirname(DOC), { recursive: true })
  fs.writeFileSync(DOC, renderDoc())
  console.log(`wrote ${DOC}: ${ROWS.length * COLUMNS.length} cells`)
} else if (require.main === module && process.argv.includes('--observed')) {
  observed()
} else {
  test('every entry of EXPECT has a row', () => {
    assert.deepEqual(Object.keys(EXPECT), ROWS.map((r) => r.entry))
  })
  test('docs/bad-input/node.md is generated from this table', () => {
    assert.equal(fs.readFileSync(DOC, 'utf8'), renderDoc(), 'run `node test/bad_input.test.js --write-doc` in node/')
  })
  // Receivers the table has no column for: the hot path of agentbreaker.js keeps its functions
  // on the breaker, so a breaker that cannot take a property, or a stand-in, must still work.
  test('a frozen or sealed breaker guards calls and answers as any other', async () => {
    for (const seal of [Object.freeze, Object.seal, Object.preventExtensions]) {
      const breaker = seal(new ab.FailureBreaker({ failureThreshold: 1 }))
      assert.equal(await breaker.call(async (x) => x * 2, 21), 42)
      assert.deepEqual(breaker.shouldAllowOperation(), { allowed: true, message: null })
      breaker.recordSuccess()
      await assert.rejects(breaker.call(() => { throw new Error('down') }), /down/)
      await assert.rejects(breaker.call(() => 1), { code: 'CIRCUIT_OPEN' })
      assert.equal(breaker.shouldAllowOperation().allowed, false)
      assert.equal(breaker.metrics().totalSuccesses, 2)
    }
  })
  test('call(), shouldAllowOperation() and recordSuccess() on something else than a breaker', async () => {
    const proto = ab.FailureBreaker.prototype
    const throwing = new Proxy(new ab.FailureBreaker(), {
      get() {
        throw new Error('a trap')
      },
    })
    await assert.rejects(proto.call.call(throwing, () => 1), /a trap/)
    await assert.rejects(proto.call.call(Object.create(proto), () => 1), (e) => e instanceof Error)
    for (const receiver of [{}, null, 42, Object.create(proto)]) {
      await assert.rejects(proto.call.call(receiver, () => 1), (e) => e instanceof Error)
      assert.throws(() => proto.shouldAllowOperation.call(receiver), Error)
      assert.throws(() => proto.recordSuccess.call(receiver), Error)
    }
    moduleWorks()
  })
  for (const r of ROWS) {
    test(r.entry, async (t) => {
      const subject = SUBJECTS[r.subject].make()
      for (let i = 0; i < COLUMNS.length; i++) {
        await t.test(`${r.entry} <- ${COLUMNS[i][0]}`, () => checkCell(r, i, subject))
      }
    })
  }
}
