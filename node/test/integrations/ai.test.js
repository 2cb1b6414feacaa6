'use strict'
// agentbreaker/ai on the real Vercel AI SDK (the `ai` of the lock file), with its own test
// double (MockLanguageModelV3 from ai/test): no network, no key.

const test = require('node:test')
const assert = require('node:assert/strict')
const { generateText, streamText, stepCountIs, tool, ToolLoopAgent } = require('ai')
const { MockLanguageModelV3, simulateReadableStream } = require('ai/test')
const { z } = require('zod')
const { AgentHaltedError, Monitor } = require('agentbreaker')
const { agentBreaker, breakerStopWhen } = require('agentbreaker/ai')

const usage = (input = 10, output = 5) => ({
  inputTokens: { total: input, noCache: input, cacheRead: 0, cacheWrite: 0 },
  outputTokens: { total: output, text: output, reasoning: 0 },
})

/** The model's turns: [text, [toolName, input]] (no call: the final answer). */
function script(turns) {
  let i = 0
  let id = 0
  const next = () => {
    const [text, call] = turns[Math.min(i++, turns.length - 1)]
    const content = text ? [{ type: 'text', text }] : []
    if (call) content.push({ type: 'tool-call', toolCallId: `call_${++id}`, toolName: call[0], input: JSON.stringify(call[1]) })
    return { content, finish: call ? 'tool-calls' : 'stop' }
  }
  return next
}

function generateModel(turns, tokens = usage()) {
  const next = script(turns)
  return new MockLanguageModelV3({
    doGenerate: async () => {
      const { content, finish } = next()
      return { content, finishReason: { unified: finish, raw: finish }, usage: tokens, warnings: [] }
    },
  })
}

function streamModel(turns, tokens = usage()) {
  const next = script(turns)
  return new MockLanguageModelV3({
    doStream: async () => {
      const { content, finish } = next()
      const chunks = [{ type: 'stream-start', warnings: [] }]
      for (const part of content) {
        if (part.type === 'text') {
          chunks.push({ type: 'text-start', id: 't' }, { type: 'text-delta', id: 't', delta: part.text }, { type: 'text-end', id: 't' })
        } else {
          chunks.push(part)
        }
      }
      chunks.push({ type: 'finish', finishReason: { unified: finish, raw: finish }, usage: tokens })
      return { stream: simulateReadableStream({ chunks, initialDelayInMs: null, chunkDelayInMs: null }) }
    },
  })
}

/** The stuck agent: the same failing `run_tests` call, whatever it is told. */
function stuck() {
  const calls = { n: 0 }
  const tools = {
    run_tests: tool({
      description: 'Runs the tests',
      inputSchema: z.object({ cmd: z.string() }),
      execute: async () => {
        calls.n++
        throw new Error('1 failed, 41 passed in 0.52s')
      },
    }),
  }
  return { tools, calls, turns: [['Let me run the tests again.', ['run_tests', { cmd: 'pytest -q' }]]] }
}

/** The healthy agent: six different calls that succeed, then an answer. */
function healthy() {
  const out = { grep: 'src/auth.py:12', read: 'def login(user): ...', edit: 'updated', test: '3 passed', diff: '1 file changed' }
  const tools = {}
  for (const [name, output] of Object.entries(out)) {
    tools[name] = tool({ description: name, inputSchema: z.object({ arg: z.string() }), execute: async ({ arg }) => `${output} (${arg})` })
  }
  const turns = [
    ['Looking for login.', ['grep', { arg: 'def login' }]],
    ['Reading it.', ['read', { arg: 'src/auth.py' }]],
    ['Reading the test.', ['read', { arg: 'tests/test_auth.py' }]],
    ['Fixing it.', ['edit', { arg: 'src/auth.py' }]],
    ['Running the tests.', ['test', { arg: 'tests/test_auth.py' }]],
    ['Checking the diff.', ['diff', { arg: '--stat' }]],
    ['The login test passes now.', null],
  ]
  return { tools, turns }
}

const NUDGE = '[agentbreaker] You have run `run_tests pytest -q` 3 times'

function lastMessageText(prompt) {
  const last = prompt[prompt.length - 1]
  return last.role === 'user' ? last.content.map((p) => p.text || '').join('') : ''
}

function assertStuckRun(guard, calls, modelCalls) {
  assert.equal(modelCalls.length, 5, 'five model calls, none after the halt')
  assert.equal(calls.n, 5)
  // warned after the third identical failing step: the fourth call reads the nudge
  assert.ok(lastMessageText(modelCalls[3].prompt).startsWith(NUDGE), lastMessageText(modelCalls[3].prompt))
  for (const i of [0, 1, 2, 4]) assert.ok(!lastMessageText(modelCalls[i].prompt).includes('[agentbreaker]'))
  assert.equal(guard.halted, true)
  assert.equal(guard.verdict, guard.halt)
  assert.equal(guard.verdict.action, 'halt')
  assert.equal(guard.verdict.reason, 'repeated_step')
  assert.equal(guard.verdict.step, 5)
  assert.match(guard.verdict.message, /the same step 5 times in a row/)
}

test('generateText: a stuck agent is nudged at step 3, then stopped by stopWhen at step 5', async () => {
  const { tools, calls, turns } = stuck()
  const model = generateModel(turns)
  const guard = agentBreaker()
  const warnings = []
  guard.monitor.on('verdict', (v) => warnings.push(`${v.action}:${v.reason}`))
  const result = await generateText({ model, tools, prompt: 'Fix the login test.', ...guard })
  assert.equal(result.steps.length, 5)
  assert.equal(result.finishReason, 'tool-calls')
  assertStuckRun(guard, calls, model.doGenerateCalls)
  assert.deepEqual(warnings, ['warn:repeated_step', 'warn:fail_streak', 'halt:repeated_step'])
  // the tool's error reached the Monitor as a failed call with its text
  const status = guard.monitor.status().tasks.find((t) => t.taskId === guard.taskId)
  assert.equal(status.toolCalls, 5)
  assert.equal(status.rules.fail_streak.count, 5)
})

test('streamText: the same stuck agent, streamed, is nudged and stopped the same way', async () => {
  const { tools, calls, turns } = stuck()
  const model = streamModel(turns)
  const guard = agentBreaker()
  const result = streamText({ model, tools, prompt: 'Fix the login test.', ...guard })
  const parts = {}
  for await (const part of result.fullStream) parts[part.type] = (parts[part.type] || 0) + 1
  assert.equal((await result.steps).length, 5)
  assert.equal(parts['finish-step'], 5)
  assert.equal(parts['tool-error'], 5)
  assertStuckRun(guard, calls, model.doStreamCalls)
})

test('ToolLoopAgent: generate() and stream() stop the stuck agent through stopWhen', async () => {
  for (const mode of ['generate', 'stream']) {
    const { tools, calls, turns } = stuck()
    const model = mode === 'generate' ? generateModel(turns) : streamModel(turns)
    const guard = agentBreaker()
    const agent = new ToolLoopAgent({ model, tools, instructions: 'You fix tests.', ...guard })
    if (mode === 'generate') {
      const result = await agent.generate({ prompt: 'Fix the login test.' })
      assert.equal(result.steps.length, 5)
      assertStuckRun(guard, calls, model.doGenerateCalls)
    } else {
      const result = await agent.stream({ prompt: 'Fix the login test.' })
      for await (const _ of result.fullStream);
      assert.equal((await result.steps).length, 5)
      assertStuckRun(guard, calls, model.doStreamCalls)
    }
  }
})

test("onHalt: 'throw': generateText rejects with the AgentHaltedError, a stream's iteration throws it", async () => {
  for (const stream of [false, true]) {
    const { tools, calls, turns } = stuck()
    const guard = agentBreaker({ onHalt: 'throw' })
    const options = { tools, prompt: 'Fix the login test.', ...guard }
    let error
    if (stream) {
      const result = streamText({ model: streamModel(turns), ...options })
      try {
        for await (const _ of result.textStream);
      } catch (e) {
        error = e
      }
      await assert.rejects(result.steps, (e) => e === error)
    } else {
      try {
        await generateText({ model: generateModel(turns), ...options })
      } catch (e) {
        error = e
      }
    }
    assert.ok(error instanceof AgentHaltedError, `${stream}: ${error}`)
    assert.equal(error.code, 'HALTED')
    assert.equal(error.verdict, guard.halt)
    assert.equal(error.verdict.reason, 'repeated_step')
    assert.equal(calls.n, 5)
  }
})

test('a healthy agent runs to its normal end, exactly as without the guard', async () => {
  for (const stream of [false, true]) {
    const results = []
    for (const guarded of [false, true]) {
      const { tools, turns } = healthy()
      const model = stream ? streamModel(turns) : generateModel(turns)
      const guard = agentBreaker()
      const options = guarded ? { ...guard } : { stopWhen: stepCountIs(20) }
      let result
      if (stream) {
        const r = streamText({ model, tools, prompt: 'Fix the login test.', ...options })
        let text = ''
        for await (const delta of r.textStream) text += delta
        result = { text, steps: await r.steps, finishReason: await r.finishReason }
      } else {
        result = await generateText({ model, tools, prompt: 'Fix the login test.', ...options })
      }
      const prompts = (stream ? model.doStreamCalls : model.doGenerateCalls).map((c) => JSON.stringify(c.prompt))
      assert.ok(prompts.every((p) => !p.includes('[agentbreaker]')))
      if (guarded) {
        assert.equal(guard.verdict, null)
        assert.equal(guard.halted, false)
      }
      results.push({
        text: stream ? result.text : result.text,
        finishReason: result.finishReason,
        steps: result.steps.map((s) => [s.text, s.toolCalls.map((c) => [c.toolName, c.input]), s.toolResults.map((r) => r.output)]),
      })
    }
    assert.deepEqual(results[1], results[0])
    assert.equal(results[1].finishReason, 'stop')
    assert.equal(results[1].steps.length, 7)
  }
})

test('your own stopWhen, prepareStep and onStepEnd are kept', async () => {
  const { tools, turns } = healthy()
  const model = generateModel(turns)
  const seen = []
  const guard = agentBreaker({
    stopWhen: stepCountIs(3),
    prepareStep: ({ stepNumber, messages }) => (stepNumber === 1 ? { messages: [...messages, { role: 'user', content: 'mine' }] } : undefined),
    onStepEnd: (step) => seen.push(step.toolCalls[0].toolName),
  })
  const result = await generateText({ model, tools, prompt: 'x', ...guard })
  assert.equal(result.steps.length, 3)
  assert.deepEqual(seen, ['grep', 'read', 'read'])
  assert.equal(lastMessageText(model.doGenerateCalls[1].prompt), 'mine')
  // maxSteps bounds the run when nothing else does
  const { tools: t2, calls, turns: t3 } = stuck()
  const capped = await generateText({ model: generateModel(t3), tools: t2, prompt: 'x', ...agentBreaker({ maxSteps: 2 }) })
  assert.equal(capped.steps.length, 2)
  assert.equal(calls.n, 2)
})

test('spend: the usage of each step counts against the budget (a 1-cent cap halts the first expensive step)', async () => {
  const { tools, turns } = healthy()
  const guard = agentBreaker({ budget: { maxTokenSpendCentsPerTask: 1 } })
  const model = generateModel(turns, usage(100_000, 1000))
  const result = await generateText({ model, tools, prompt: 'x', ...guard })
  assert.equal(result.steps.length, 1)
  assert.equal(guard.verdict.reason, 'token_spend_limit')
  assert.equal(guard.monitor.status().tasks[0].spendCents, 31.5)
})

test('breakerStopWhen(monitor): a StopCondition for a Monitor you feed yourself; reset() starts a new run', async () => {
  const monitor = new Monitor()
  const condition = breakerStopWhen(monitor)
  assert.equal(condition({ steps: [] }), false)
  for (let i = 0; i < 5; i++) {
    monitor.observe({ type: 'tool_use', name: 'x', id: `t${i}`, taskId: 'mine' })
    monitor.observe({ type: 'tool_result', ok: false, text: 'no', id: `t${i}`, taskId: 'mine' })
  }
  assert.equal(condition({ steps: [] }), true)
  assert.equal(breakerStopWhen(monitor, { taskId: 'other' })({ steps: [] }), false)

  const { tools, turns } = stuck()
  const guard = agentBreaker({ monitor })
  await generateText({ model: generateModel(turns), tools, prompt: 'x', ...guard })
  const first = guard.taskId
  assert.equal(guard.halted, true)
  guard.reset()
  assert.notEqual(guard.taskId, first)
  assert.equal(guard.verdict, null)
  assert.ok(!monitor.status().tasks.some((t) => t.taskId === first), 'the old run is closed')
  assert.deepEqual(Object.keys({ ...guard }).sort(), ['onStepEnd', 'onStepFinish', 'prepareStep', 'stopWhen'])
})

// ---- one guard, many runs -------------------------------------------------------------------

/**
 * A model for several runs at once: the run's first user message says what it is. 'stuck': the
 * same failing run_tests call, whatever it is told; else the healthy script, one turn per tool
 * result the run has had. Each call is recorded with its run's name.
 */
function runsModel({ streamed = false, chunkDelayInMs = null } = {}) {
  const healthyTurns = healthy().turns
  const calls = []
  let id = 0
  const answer = (prompt) => {
    const user = prompt.find((m) => m.role === 'user')
    const name = user.content.map((p) => p.text || '').join('')
    calls.push({ name, prompt })
    let turn
    if (name.includes('stuck')) turn = stuck().turns[0]
    else turn = healthyTurns[Math.min(prompt.filter((m) => m.role === 'tool').length, healthyTurns.length - 1)]
    const [text, call] = turn
    const content = [{ type: 'text', text }]
    if (call) content.push({ type: 'tool-call', toolCallId: `call_${++id}`, toolName: call[0], input: JSON.stringify(call[1]) })
    return { content, finish: call ? 'tool-calls' : 'stop' }
  }
  const model = new MockLanguageModelV3({
    doGenerate: async ({ prompt }) => {
      const { content, finish } = answer(prompt)
      return { content, finishReason: { unified: finish, raw: finish }, usage: usage(), warnings: [] }
    },
    doStream: async ({ prompt }) => {
      const { content, finish } = answer(prompt)
      const chunks = [{ type: 'stream-start', warnings: [] }]
      for (const part of content) {
        if (part.type === 'text') {
          chunks.push({ type: 'text-start', id: 't' }, { type: 'text-delta', id: 't', delta: part.text }, { type: 'text-end', id: 't' })
        } else {
          chunks.push(part)
        }
      }
      chunks.push({ type: 'finish', finishReason: { unified: finish, raw: finish }, usage: usage() })
      return { stream: simulateReadableStream({ chunks, initialDelayInMs: null, chunkDelayInMs }) }
    },
  })
  const tools = { ...stuck().tools, ...healthy().tools }
  const ofRun = (name) => calls.filter((c) => c.name === name).map((c) => c.prompt)
  return { model, tools, calls, ofRun, streamed }
}

/** Runs `prompt` on the guard through `mode`: 'generateText', 'streamText', 'agent.generate', 'agent.stream'. */
async function runOn(mode, setup, guard, prompt, agent) {
  const { model, tools } = setup
  if (mode === 'generateText') return generateText({ model, tools, prompt, ...guard })
  let result
  if (mode === 'streamText') result = streamText({ model, tools, prompt, ...guard })
  else if (mode === 'agent.generate') return agent.generate({ prompt })
  else result = await agent.stream({ prompt })
  for await (const _ of result.textStream);
  const steps = await result.steps
  return { text: steps[steps.length - 1].text, steps, finishReason: await result.finishReason }
}

const MODES = ['generateText', 'streamText', 'agent.generate', 'agent.stream']

function assertStuckPrompts(prompts) {
  assert.equal(prompts.length, 5, 'five model calls, none after the halt')
  assert.ok(lastMessageText(prompts[3]).startsWith(NUDGE), lastMessageText(prompts[3]))
  for (const i of [0, 1, 2]) assert.ok(!JSON.stringify(prompts[i]).includes('[agentbreaker]'), `call ${i + 1}`)
  assert.ok(!lastMessageText(prompts[4]).includes('[agentbreaker]'))
}

test('one guard, one run after another: a run ended by a step limit leaves nothing to the next (its own task, nudges, halt)', async () => {
  for (const mode of MODES) {
    const setup = runsModel()
    let cap = 3
    const guard = agentBreaker({ stopWhen: ({ steps }) => steps.length >= cap })
    const agent = new ToolLoopAgent({ model: setup.model, tools: setup.tools, ...guard })
    // run 1: warned at its third step, ended there by the step limit: its nudge was never read
    const first = await runOn(mode, setup, guard, 'stuck 1', agent)
    assert.equal(first.steps.length, 3, mode)
    assert.equal(guard.verdict.action, 'warn', mode)
    const firstTask = guard.taskId
    cap = Infinity
    // run 2, the same stuck agent: counted from zero, nudged before its own fourth call, halted at its fifth
    const second = await runOn(mode, setup, guard, 'stuck 2', agent)
    assert.equal(second.steps.length, 5, mode)
    assertStuckPrompts(setup.ofRun('stuck 2'))
    assert.notEqual(guard.taskId, firstTask, mode)
    assert.equal(guard.halted, true, mode)
    assert.equal(guard.halt.step, 5, mode)
    assert.equal(guard.halt.reason, 'repeated_step', mode)
    assert.equal(guard.runOf(first.steps).halted, false, mode)
    assert.equal(guard.runOf(first.steps).taskId, firstTask, mode)
    assert.equal(guard.runOf(second.steps).halt, guard.halt, mode)
    const tasks = guard.monitor.status().tasks.map((t) => t.taskId)
    assert.deepEqual(tasks, [guard.taskId], `${mode}: the ended run's task is closed when the next starts`)
  }
  // the guard's own maxSteps: each run gets its steps, and its warning at its own third step
  const setup = runsModel()
  const guard = agentBreaker({ maxSteps: 3 })
  for (const name of ['stuck 1', 'stuck 2']) {
    const result = await generateText({ model: setup.model, tools: setup.tools, prompt: name, ...guard })
    assert.equal(result.steps.length, 3)
    assert.equal(guard.halted, false)
    assert.equal(guard.verdict.step, 3)
    assert.ok(setup.ofRun(name).every((p) => !JSON.stringify(p).includes('[agentbreaker]')))
  }
})

test('one guard: a healthy run after a halted one runs to its normal end', async () => {
  for (const mode of MODES) {
    const setup = runsModel()
    const guard = agentBreaker()
    const agent = new ToolLoopAgent({ model: setup.model, tools: setup.tools, ...guard })
    const halted = await runOn(mode, setup, guard, 'stuck', agent)
    assert.equal(halted.steps.length, 5, mode)
    assert.equal(guard.halted, true, mode)
    const haltedTask = guard.taskId
    const done = await runOn(mode, setup, guard, 'healthy', agent)
    assert.equal(done.steps.length, 7, mode)
    assert.equal(done.finishReason, 'stop', mode)
    assert.equal(done.text, 'The login test passes now.', mode)
    assert.equal(guard.halted, false, mode)
    assert.equal(guard.verdict, null, mode)
    assert.ok(setup.ofRun('healthy').every((p) => !JSON.stringify(p).includes('[agentbreaker]')), mode)
    assert.ok(!guard.monitor.status().tasks.some((t) => t.taskId === haltedTask), `${mode}: the halted run's task is closed`)
    assert.equal(guard.runOf(halted.steps).halted, true, mode)
  }
})

test('one guard: runs at once are separate tasks, each with its own nudges and halt', async () => {
  for (const mode of MODES) {
    for (const chunkDelayInMs of [null, 1]) {
      const setup = runsModel({ chunkDelayInMs })
      const seen = []
      const guard = agentBreaker({ onStepEnd: (step) => seen.push(step.stepNumber) })
      const agent = new ToolLoopAgent({ model: setup.model, tools: setup.tools, ...guard })
      const [a, b, c] = await Promise.all([
        runOn(mode, setup, guard, 'healthy A', agent),
        runOn(mode, setup, guard, 'stuck B', agent),
        runOn(mode, setup, guard, 'healthy C', agent),
      ])
      const label = `${mode}, delay ${chunkDelayInMs}`
      for (const [name, result] of [['healthy A', a], ['healthy C', c]]) {
        assert.equal(result.steps.length, 7, `${label}: ${name}`)
        assert.equal(result.finishReason, 'stop', `${label}: ${name}`)
        assert.ok(setup.ofRun(name).every((p) => !JSON.stringify(p).includes('[agentbreaker]')), `${label}: ${name}`)
        assert.equal(guard.runOf(result.steps).verdict, null, `${label}: ${name}`)
      }
      assert.equal(b.steps.length, 5, label)
      assertStuckPrompts(setup.ofRun('stuck B'))
      const run = guard.runOf(b.steps)
      assert.equal(run.halt.step, 5, label)
      assert.equal(run.halt.reason, 'repeated_step', label)
      const status = guard.monitor.status().tasks
      assert.equal(new Set([a, b, c].map((r) => guard.runOf(r.steps).taskId)).size, 3, label)
      for (const r of [a, b, c]) {
        const task = status.find((t) => t.taskId === guard.runOf(r.steps).taskId)
        assert.equal(task.toolCalls, r.steps.length === 7 ? 6 : 5, label)
      }
      assert.equal(seen.length, 7 + 5 + 7, label)
    }
  }
})

test('a tool input that is not JSON (a BigInt from a zod transform) is watched as text: the step counts and your onStepEnd runs', async () => {
  const failing = {
    fetch_row: tool({
      description: 'A row by id',
      inputSchema: z.object({ id: z.string().transform((s) => BigInt(s)) }),
      execute: async ({ id }) => {
        throw new Error(`row ${id}: connection refused`)
      },
    }),
  }
  const seen = []
  const guard = agentBreaker({ onStepEnd: (step) => seen.push(step.toolCalls.map((c) => typeof c.input.id)) })
  const model = generateModel([['Fetching the row.', ['fetch_row', { id: '12345678901234567890' }]]])
  const result = await generateText({ model, tools: failing, prompt: 'x', ...guard })
  // the same failing call with the same (BigInt) input: nudged at 3, halted at 5, as any other
  assert.equal(result.steps.length, 5)
  assert.deepEqual(seen, Array(5).fill(['bigint']))
  assert.equal(guard.halt.reason, 'repeated_step')
  assert.equal(guard.halt.step, 5)
  assert.ok(lastMessageText(model.doGenerateCalls[3].prompt).startsWith('[agentbreaker] You have run `fetch_row'))
  const status = guard.monitor.status().tasks.find((t) => t.taskId === guard.taskId)
  assert.equal(status.toolCalls, 5)
  assert.equal(guard.observeErrors, 0)
})
