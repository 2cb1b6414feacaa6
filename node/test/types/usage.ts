// Type-checked (never run) with `tsc --noEmit --strict -p test/types`: a small program against
// index.d.ts, plus `@ts-expect-error` lines that must stay errors.
import {
  AgentHaltedError,
  analyze,
  BudgetBreaker,
  configFromEnv,
  ExitStrategy,
  FailureBreaker,
  fingerprint,
  FixPlan,
  Loop,
  ManualClock,
  metricDefinitions,
  metricUpdates,
  Monitor,
  profile,
  profileNames,
  StagnationBreaker,
  SystemClock,
} from '../..'
import type {
  AgentBreakerError,
  Analysis,
  CircuitState,
  ErrorCode,
  ExitReason,
  FailureStatus,
  Halt,
  HaltSlug,
  LoopDecision,
  MetricDefinition,
  MetricUpdate,
  MonitorConfig,
  MonitorEvent,
  MonitorStatus,
  Permission,
  ProfileName,
  RuleSlug,
  StateChangeEvent,
  StoreStatus,
  Verdict,
  VerdictAction,
  VerdictEvent,
  WarningEvent,
} from '../..'

async function failureBreaker(): Promise<void> {
  const clock = new ManualClock(0)
  const breaker = new FailureBreaker({ failureThreshold: 5, cooldownMs: 30_000 }, clock)
  const status: FailureStatus = breaker.getStatus()
  const state: CircuitState = status.state
  const openedAt: number | null = status.openedAt
  const permission: Permission = breaker.shouldAllowOperation()
  const shared = new FailureBreaker({ store: 'redis://:pw@10.0.0.5:6379/0', key: 'tool:search', storeTimeoutMs: 50, storeFailure: 'open' })
  const where: StoreStatus | null = shared.storeStatus()
  void (where !== null && [where.url, where.key, where.outages, where.lastError])
  const allowed: boolean = permission.allowed
  const message: string | null = permission.message
  breaker.recordFailure('Path not found: ServerScriptService.MainScript')
  breaker.recordSuccess()
  clock.advance(1000)
  clock.set(2000)

  breaker
    .on('stateChange', (event) => {
      const change: StateChangeEvent = event
      const to: CircuitState = change.to
      void to
    })
    .on('warning', (event: WarningEvent) => void event.message)

  // call() keeps the function's result type, for sync and async functions and their arguments.
  const length: number = await breaker.call((text: string) => text.length, 'hello')
  const fetched: { ok: boolean } = await breaker.call(async (ok: boolean) => ({ ok }), true)
  try {
    await breaker.call(async () => 'never')
  } catch (error) {
    const code: ErrorCode = (error as AgentBreakerError).code
    if (code === 'CIRCUIT_OPEN') void code
  }
  void [state, openedAt, allowed, message, length, fetched, breaker.state, breaker.listenerErrors]
  void new FailureBreaker(null, new SystemClock())
  void new FailureBreaker()

  // @ts-expect-error a misspelt config key
  void new FailureBreaker({ failureTreshold: 5 })
  // @ts-expect-error FailureBreakers emit no halt events
  breaker.on('halt', () => undefined)
  // @ts-expect-error the error text is a string
  breaker.recordFailure(42)
  // @ts-expect-error the arguments must fit the function
  void breaker.call((n: number) => n, 'not a number')
  // @ts-expect-error states are upper case
  const lower: CircuitState = 'open'
  void lower
}

function stagnation(): void {
  const breaker = new StagnationBreaker({ noProgressThreshold: 3 })
  breaker.recordProgress({ filesChanged: 1, testsPassing: 4, outputLength: 900 })
  breaker.recordError('rate limited', { transient: true })
  const decision = breaker.check()
  const keepGoing: boolean = decision.allowContinue
  const counts: Record<string, number> = breaker.getStatus().errorCounts
  breaker.restore(breaker.snapshot())
  breaker.recordStep({ action: 'bash: pytest -q', result: '3 failed', failed: true })
  const coding = profile('coding-agent')
  if (coding !== null) void new StagnationBreaker(coding.stagnation).recordStep({ action: 'read a' })
  const names: ProfileName[] = profileNames()
  void names
  breaker.on('stateChange', (event) => void event.reason)
  void [keepGoing, counts]
  // @ts-expect-error a step needs its action
  breaker.recordStep({ result: 'ok' })
  // @ts-expect-error transient is a boolean
  breaker.recordError('x', { transient: 'yes' })
}

function budget(): void {
  const fromEnv = configFromEnv({ AGENTBREAKER_TOOL_CAP: '20' })
  const cap: number = fromEnv.config.maxToolCallsPerTask
  const budget = new BudgetBreaker({ ...fromEnv.config, maxIdleSecs: 60 })
  budget.ingest({ type: 'heartbeat', taskId: 'research', phase: 'starting' })
  const halt: Halt | null = budget.ingest({ type: 'tool_use', name: 'web_fetch' })
  if (halt !== null && halt.kind === 'ToolCallLimit') {
    const over: number = halt.actual - halt.limit
    void over
  }
  const slugs: HaltSlug[] = budget.tick().map((h) => h.slug)
  budget.on('halt', (event) => void event.halt.taskId)
  void [cap, slugs, configFromEnv()]
  // @ts-expect-error not a slug
  const slug: HaltSlug = 'tool-call-limit'
  void slug
}

function strategies(): void {
  const analysis: Analysis = analyze('All tasks complete. 42 tests passed.')
  const strategy = new ExitStrategy({ type: 'composite', mode: 'any', members: [{ type: 'auto' }, { type: 'circuit_breaker' }] })
  const reason: ExitReason | null = strategy.shouldExit(analysis, 'CLOSED').reason
  const plan = FixPlan.fromMarkdown('- [ ] parse\n- [x] lex', 2)
  const current: number | null = plan.getStatus().currentStep
  plan.on('warning', (event) => void event.message)
  void [reason, current, fingerprint('Error at 12:34', 'normalized')]
  // @ts-expect-error strategies need a type
  void new ExitStrategy({ threshold: 70 })
}

function agentLoop(): void {
  const loop = new Loop({ maxIterations: 10, budget: { maxToolCallsPerTask: 5 } })
  const decision: LoopDecision = loop.observe({ output: 'Refactored the parser.', filesChanged: 2, events: [{ type: 'tool_use', name: 'edit' }] })
  if (decision.action === 'exit') {
    const outcome: 'success' | 'failure' | null = decision.outcome
    void outcome
  }
  loop.on('halt', (event) => void event.halt.slug).on('stateChange', (event) => void event.to)
  void loop.getStatus().budget
  // @ts-expect-error output is required
  loop.observe({ filesChanged: 1 })
}

function monitor(): void {
  const config: MonitorConfig = { profile: 'coding-agent', toolLimits: { web_fetch: 20 }, warnBefore: 2, clock: new ManualClock(0) }
  const watcher = new Monitor(config)
  void new Monitor({ budget: { maxToolCallsPerTask: 50 }, stagnation: { repeatThreshold: 5 } }, new SystemClock())
  void new Monitor()
  const events: MonitorEvent[] = [
    { type: 'assistant', text: 'Let me run the tests.' },
    { type: 'tool_use', name: 'Bash', id: 't1', input: { command: 'pytest -q' } },
    { type: 'tool_result', id: 't1', ok: false, text: '1 failed' },
    { type: 'usage', model: 'claude-sonnet-4', usage: { input_tokens: 1200, output_tokens: 80 } },
    { type: 'usage', costCents: 1.5 },
    { type: 'progress', files: ['src/parser.py'], testsPassing: 41, digest: 'a3f9' },
    { type: 'error', text: 'rate limited', transient: true },
    { type: 'heartbeat', taskId: 'research', phase: 'starting' },
    { type: 'alive', taskId: 'research', source: 'a framework key' },
  ]
  for (const event of events) {
    const verdict: Verdict = watcher.observe(event)
    const action: VerdictAction = verdict.action
    if (verdict.action === 'halt') {
      const slug: RuleSlug = verdict.reason
      const nudge: string = verdict.nudge
      const count: number | undefined = verdict.detail.count
      void [slug, nudge, count]
      throw new AgentHaltedError(verdict)
    }
    if (verdict.action === 'continue') {
      const none: null = verdict.reason
      void none
    }
    void action
  }
  const ticked: Verdict[] = watcher.tick()
  const status: MonitorStatus = watcher.status()
  const halted: boolean = status.tasks.every((t) => t.halted && t.halt !== null && t.rules.no_progress !== undefined)
  watcher.restore(watcher.snapshot())
  watcher.reset()
  watcher.on('verdict', (event: VerdictEvent) => void [event.atMs, event.reason, event.action === 'warn'])
  watcher.off('verdict', () => undefined)
  try {
    throw new AgentHaltedError('stopped by hand')
  } catch (error) {
    if (error instanceof AgentHaltedError) {
      const code: 'HALTED' = error.code
      const reason: RuleSlug | null = error.verdict.reason
      void [code, reason, error.message]
    }
  }
  void [ticked, halted, watcher.listenerErrors, watcher.config.warnBefore, watcher.config.storeFailure]
  const shared = new Monitor({ store: 'redis://127.0.0.1:6379/0', key: 'tenant-42', storeTimeoutMs: 50, storeFailure: 'closed' })
  const where: StoreStatus | null = shared.storeStatus()
  shared.setMetricsRecorder((updates: MetricUpdate[]) => {
    for (const [name, value, attributes] of updates) void [name.length, value + 1, attributes.reason]
  }, { task: true })
  shared.setMetricsRecorder(null)
  const definitions: MetricDefinition[] = metricDefinitions()
  const updates: MetricUpdate[] = metricUpdates({ type: 'stateChange', from: 'CLOSED', to: 'OPEN', reason: 'r', slug: null, atMs: 0 }, 'failure', { task: false })
  void [where?.mode, definitions[0].buckets, updates]
  // @ts-expect-error the store keys go at a Monitor's top level, not in its failure section
  void new Monitor({ failure: { store: 'redis://127.0.0.1:6379/0' } })
  // @ts-expect-error storeFailure is 'open' or 'closed'
  void new Monitor({ storeFailure: 'maybe' })
  // @ts-expect-error a tool_use needs its name
  watcher.observe({ type: 'tool_use', input: {} })
  // @ts-expect-error a result's ok is a boolean
  watcher.observe({ type: 'tool_result', ok: 'yes' })
  // @ts-expect-error Monitors emit verdict events only
  watcher.on('halt', () => undefined)
  // @ts-expect-error not a profile
  void new Monitor({ profile: 'fast' })
  // @ts-expect-error not a slug
  const slug: RuleSlug = 'repeated-step'
  // @ts-expect-error a continue verdict cannot be thrown
  void new AgentHaltedError(watcher.observe({ type: 'alive' }))
  void slug
}

void [failureBreaker, stagnation, budget, strategies, agentLoop, monitor]
